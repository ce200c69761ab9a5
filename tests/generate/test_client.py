"""The chat client against a local OpenAI-compatible server (127.0.0.1, started by the test): a
429 is retried, a 5xx past its retries, a stall past the timeout and malformed JSON end as
recorded failures; a refusal and an empty answer are named; the key goes only into the header."""

from __future__ import annotations

import pytest

from kernelbench_v3.generate.client import ChatClient, RequestParams, RetryPolicy, scrub
from tests.generate.fake_openai import FakeOpenAI

MESSAGES = [{"role": "user", "content": "Task: level1/23_Softmax"}]
PARAMS = RequestParams(model="fake-model", temperature=0.5, max_tokens=100)
FAST_RETRY = RetryPolicy(retries=2, backoff_s=0.01, cap_s=0.05)


@pytest.fixture
def server():
    with FakeOpenAI({"Task: level1/23_Softmax": "```python\nclass Model: pass\n```"}, stall_s=1.5) as fake:
        yield fake


def client(server, **kwargs) -> ChatClient:
    kwargs.setdefault("timeout_s", 5.0)
    kwargs.setdefault("retry", FAST_RETRY)
    return ChatClient(server.base_url, **kwargs)


def test_an_answer_comes_back_with_its_usage_and_the_request_parameters(server):
    with client(server) as c:
        reply = c.complete(MESSAGES, PARAMS)
    assert reply.status == "ok" and "class Model" in reply.text and reply.finish_reason == "stop"
    assert reply.usage["total_tokens"] == 150 and reply.attempts == 1 and reply.latency_s >= 0
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["body"] == {"model": "fake-model", "messages": MESSAGES, "temperature": 0.5, "max_tokens": 100}
    assert "authorization" not in {k.lower() for k in request["headers"]}  # no key: none sent


def test_a_429_is_retried_with_backoff_and_then_answered(server):
    server.script = ["429"]
    waits = []
    with client(server, sleep=waits.append) as c:
        reply = c.complete(MESSAGES, PARAMS)
    assert reply.status == "ok" and reply.attempts == 2 and len(server.requests) == 2
    assert len(waits) == 1 and 0 <= waits[0] <= FAST_RETRY.backoff_s


def test_5xx_past_the_retries_is_a_recorded_failure_not_a_crash(server):
    server.script = ["500"] * 10
    with client(server, sleep=lambda s: None) as c:
        reply = c.complete(MESSAGES, PARAMS)
    assert reply.status == "error" and "HTTP 500 (after retries)" in reply.reason
    assert reply.attempts == FAST_RETRY.retries + 1 == len(server.requests)


def test_a_stall_past_the_timeout_is_a_recorded_failure_and_not_retried(server):
    server.script = ["stall"]
    with client(server, timeout_s=0.3) as c:
        reply = c.complete(MESSAGES, PARAMS)
    assert reply.status == "error" and reply.reason.startswith("timeout") and len(server.requests) == 1


def test_malformed_json_is_a_recorded_failure(server):
    server.script = ["malformed"]
    with client(server) as c:
        reply = c.complete(MESSAGES, PARAMS)
    assert reply.status == "error" and "malformed response: not JSON" in reply.reason


def test_a_refusal_and_an_empty_answer_are_named(server):
    server.script = ["refuse", "empty"]
    with client(server) as c:
        refused, empty = c.complete(MESSAGES, PARAMS), c.complete(MESSAGES, PARAMS)
    assert refused.status == "refused" and "I will not write that" in refused.reason
    assert empty.status == "empty" and empty.text == "" and "empty answer" in empty.reason


def test_the_key_goes_into_the_header_and_never_into_a_reason(server):
    key = "sk-test-KEY-0123456789"
    server.script = ["500"] * 10
    with client(server, api_key=key, sleep=lambda s: None) as c:
        reply = c.complete(MESSAGES, PARAMS)
    assert all(r["headers"].get("Authorization") == f"Bearer {key}" for r in server.requests)
    assert key not in repr(reply)
    # A server that echoes the key back in its error body gets it scrubbed.
    assert scrub(f"bad key {key}", key) == "bad key ***"


def test_a_refused_connection_is_a_recorded_failure():
    with ChatClient("http://127.0.0.1:9/v1", "sk-secret-value", timeout_s=2.0, retry=FAST_RETRY) as c:
        reply = c.complete(MESSAGES, PARAMS)
    assert reply.status == "error" and reply.reason.startswith("no connection") and "sk-secret" not in reply.reason


def test_backoff_is_jittered_capped_and_honours_retry_after():
    policy = RetryPolicy(retries=5, backoff_s=1.0, cap_s=4.0)
    for attempt in range(6):
        for _ in range(20):
            assert 0.0 <= policy.wait_s(attempt) <= min(4.0, 2.0**attempt)
    assert 2.0 <= policy.wait_s(0, retry_after="2") <= 4.0
    assert policy.wait_s(0, retry_after="3600") == 4.0  # capped
    assert 0.0 <= policy.wait_s(0, retry_after="Wed, 21 Oct 2015 07:28:00 GMT") <= 1.0


def test_a_server_that_echoes_the_key_gets_it_scrubbed_from_the_answer(server):
    key = "sk-echo-KEY-99887766"
    server.answers = {"Task:": f"your key is {key}"}
    with client(server, api_key=key) as c:
        reply = c.complete(MESSAGES, PARAMS)
    assert reply.status == "ok" and reply.text == "your key is ***"
