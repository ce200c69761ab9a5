"""One chat-completions request to an OpenAI-compatible endpoint, and what came back.

Owns the wire protocol (`POST {base_url}/chat/completions` through `httpx`; plain answers for
`generate`, function calling (`tools`) for `agent`), the retry policy
(429 and 5xx are retried with exponential backoff and full jitter, `Retry-After` honoured up to
the cap; every other failure is final) and the one shape every outcome takes, `Reply`: a
timeout, a refused or empty answer, malformed JSON or an HTTP error is a `Reply` with a status
and a reason, never an exception, so a run records it and goes on.

The API key lives only in the `Authorization` header of the `httpx.Client`; every reason that
leaves this module passes through `scrub`, so the key cannot reach a record, a log or an error.
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

ReplyStatus = Literal["ok", "empty", "refused", "error"]
REPLY_STATUSES: tuple[ReplyStatus, ...] = ("ok", "empty", "refused", "error")
# The statuses that are the model's answer: final. An "error" reply (no answer came) is sent
# again when the run is rerun.
ANSWERED: frozenset[str] = frozenset({"ok", "empty", "refused"})

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
BACKOFF_CAP_S = 60.0
REASON_LIMIT = 300  # characters of a server's error body kept in a reason


@dataclass(frozen=True)
class RequestParams:
    """What is sent besides the messages; journaled with each response."""

    model: str
    temperature: float = 0.0
    max_tokens: int = 8192

    def body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        body = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        return body


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait again after a 429 or a 5xx."""

    retries: int = 5
    backoff_s: float = 1.0  # the first wait's upper bound; doubled each attempt
    cap_s: float = BACKOFF_CAP_S

    def wait_s(self, attempt: int, retry_after: str | None = None) -> float:
        """Full jitter: uniform in [0, min(cap, backoff * 2^attempt)]; a server's Retry-After
        (seconds) is the floor when it is given, still capped."""
        ceiling = min(self.cap_s, self.backoff_s * (2**attempt))
        wait = random.uniform(0.0, ceiling)
        try:
            if retry_after is not None:
                wait = max(wait, min(self.cap_s, float(retry_after)))
        except ValueError:
            pass  # an HTTP date: the jittered wait stands
        return wait


@dataclass(frozen=True)
class Reply:
    """One request's outcome. `text` is the answer ("" when none); `reason` says why it is not "ok".

    `tool_calls` are the function calls the answer makes (`[{"id", "name", "arguments"}]`, the
    arguments as the JSON text the model wrote); an answer with calls and no text is "ok".
    `http_status` is the last HTTP status seen (None: no response came)."""

    status: ReplyStatus
    text: str = ""
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    latency_s: float = 0.0
    attempts: int = 1
    reason: str = ""
    tool_calls: list[dict[str, str]] = field(default_factory=list)
    http_status: int | None = None

    @property
    def tokens(self) -> int:
        return int(self.usage.get("total_tokens") or 0)


def scrub(text: str, secret: str | None) -> str:
    """`text` with every occurrence of `secret` replaced by `***`."""
    return text.replace(secret, "***") if secret else text


def check_base_url(base_url: str) -> str:
    """The URL, or ValueError saying what is wrong with it (an http(s) URL with a host)."""
    try:
        url = httpx.URL(base_url)
    except (httpx.InvalidURL, ValueError) as exc:
        raise ValueError(f"{base_url!r} is not a URL ({exc})") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"{base_url!r} is not an http(s) URL with a host, e.g. http://127.0.0.1:8000/v1")
    return base_url


class ChatClient:
    """A thread-safe client of one endpoint. `api_key=None` sends no Authorization header
    (a local vLLM or SGLang server)."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        retry: RetryPolicy = RetryPolicy(),
        sleep=time.sleep,
    ):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self._key = api_key or None
        self.timeout_s = timeout_s
        self.retry = retry
        self._sleep = sleep
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # A server on this machine is reached directly, never through a proxy from the environment;
        # a remote one honours HTTPS_PROXY, NO_PROXY and SSL_CERT_FILE as usual.
        local = httpx.URL(self.url).host in ("127.0.0.1", "localhost", "::1")
        self._http = httpx.Client(headers=headers, timeout=httpx.Timeout(timeout_s), trust_env=not local)

    def scrub(self, text: str) -> str:
        """`text` with this client's key replaced by `***` (a server may echo what it was sent)."""
        return scrub(text, self._key)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def complete(
        self,
        messages: list[dict[str, Any]],
        params: RequestParams,
        tools: list[dict[str, Any]] | None = None,
        timeout_s: float | None = None,
    ) -> Reply:
        """Send one request (offering `tools` to call, when given), retrying 429/5xx per the
        policy; never raises for what the server does. `timeout_s` shortens this request's
        timeout below the client's (an agent episode's remaining time)."""
        started = time.monotonic()
        attempt = 0
        limit_s = self.timeout_s if timeout_s is None else max(0.001, min(self.timeout_s, timeout_s))
        while True:
            attempt += 1
            reply = self._once(params.body(messages, tools), limit_s)
            if not isinstance(reply, httpx.Response):
                return _with(reply, started, attempt, self._key)
            if reply.status_code in RETRY_STATUS and attempt <= self.retry.retries:
                self._sleep(self.retry.wait_s(attempt - 1, reply.headers.get("retry-after")))
                continue
            return _with(_read(reply), started, attempt, self._key)

    def _once(self, body: dict[str, Any], limit_s: float) -> httpx.Response | Reply:
        try:
            return self._http.post(self.url, json=body, timeout=httpx.Timeout(limit_s))
        except httpx.TimeoutException:
            return Reply("error", reason=f"timeout: no complete answer within {limit_s:g} s")
        except httpx.HTTPError as exc:  # connection refused, reset, a bad URL...
            return Reply("error", reason=f"no connection: {type(exc).__name__}: {exc}")


def _with(reply: Reply, started: float, attempts: int, key: str | None) -> Reply:
    return Reply(
        status=reply.status,
        text=scrub(reply.text, key),
        finish_reason=reply.finish_reason,
        usage=reply.usage,
        latency_s=round(time.monotonic() - started, 3),
        attempts=attempts,
        reason=scrub(reply.reason, key),
        tool_calls=[{k: scrub(v, key) for k, v in call.items()} for call in reply.tool_calls],
        http_status=reply.http_status,
    )


def _read(response: httpx.Response) -> Reply:
    """A response -> Reply: HTTP errors, malformed JSON, refusals and empty answers named."""
    if response.status_code != 200:
        body = response.text.strip().replace("\n", " ")[:REASON_LIMIT]
        retried = " (after retries)" if response.status_code in RETRY_STATUS else ""
        return Reply("error", reason=f"HTTP {response.status_code}{retried}: {body}", http_status=response.status_code)
    reply = _read_answer(response)
    return dataclasses.replace(reply, http_status=200)


def _read_answer(response: httpx.Response) -> Reply:
    try:
        data = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return Reply("error", reason=f"malformed response: not JSON ({response.text[:80]!r}...)")
    try:
        choice = data["choices"][0]
        message = choice.get("message") or {}
        calls = _tool_calls(message.get("tool_calls"))
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        return Reply("error", reason="malformed response: no choices[0].message, or tool_calls not a list of calls")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    usage = {k: int(v) for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)}
    finish = choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None
    text = message.get("content") if isinstance(message.get("content"), str) else ""
    refusal = message.get("refusal")
    if (isinstance(refusal, str) and refusal.strip()) or finish == "content_filter":
        why = refusal.strip()[:REASON_LIMIT] if isinstance(refusal, str) and refusal.strip() else "content_filter"
        return Reply("refused", text=text, finish_reason=finish, usage=usage, reason=f"refused: {why}")
    if not text.strip() and not calls:
        return Reply("empty", finish_reason=finish, usage=usage, reason=f"empty answer (finish_reason {finish})")
    return Reply("ok", text=text, finish_reason=finish, usage=usage, tool_calls=calls)


def _tool_calls(raw: Any) -> list[dict[str, str]]:
    """The answer's function calls as `{"id", "name", "arguments"}` texts; ValueError for a
    shape that is not OpenAI's (`[{"id", "type": "function", "function": {"name", "arguments"}}]`)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError("tool_calls is not a list")
    calls = []
    for number, call in enumerate(raw):
        function = call["function"]
        name, arguments = function["name"], function.get("arguments")
        if not isinstance(name, str):
            raise ValueError("a tool call without a name")
        if isinstance(arguments, (dict, list)):  # a server that decoded them already
            arguments = json.dumps(arguments)
        call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else f"call_{number}"
        calls.append({"id": call_id, "name": name, "arguments": arguments if isinstance(arguments, str) else ""})
    return calls
