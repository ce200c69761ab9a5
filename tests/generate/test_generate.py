"""`kbv3 generate` against a local OpenAI-compatible server (127.0.0.1, started by the test):
responses journaled, extracted into the samples layout eval-batch reads, resumed by sending only
what is missing, the key in no file, and every fault recorded rather than raised."""

from __future__ import annotations

import json

import pytest

from kernelbench_v3.catalog.problem import get_problem
from kernelbench_v3.cli.main import main
from kernelbench_v3.prompts import to_messages
from kernelbench_v3.runs.sample_files import read_manifest
from tests.generate.fake_openai import FakeOpenAI

SOFTMAX, GELU = "level1/23_Softmax", "level1/26_GELU_"
CODE = "```python\nimport torch\n\nclass Model(torch.nn.Module):\n    pass\n```\n"
KEY = "sk-fake-0f1e2d3c4b5a69788796a5b4c3d2e1f0"


@pytest.fixture
def server():
    answers = {f"Task: {SOFTMAX}": "Here it is:\n" + CODE, f"Task: {GELU}": "Sorry, no code today."}
    with FakeOpenAI(answers, stall_s=1.5) as fake:
        yield fake


def generate(server, run_dir, *extra: str) -> int:
    return main(
        [
            "generate",
            "--split",
            "h100",
            "--model",
            "fake/model-7b",
            "--base-url",
            server.base_url,
            "--only",
            f"{SOFTMAX},{GELU}",
            "--out",
            str(run_dir),
            "--no-progress",
            *extra,
        ]
    )


def journal(run_dir) -> list[dict]:
    lines = (run_dir / "responses.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines[1:]]  # after the settings header


def test_a_run_journals_every_response_and_writes_the_samples_layout(server, tmp_path, capsys):
    run = tmp_path / "run"
    assert generate(server, run, "--samples", "2", "--temperature", "0.7", "--concurrency", "2") == 0
    records = journal(run)
    assert sorted((r["problem_id"], r["sample"]) for r in records) == [(SOFTMAX, 0), (SOFTMAX, 1), (GELU, 0), (GELU, 1)]
    first = records[0]
    assert first["model"] == "fake/model-7b" and first["params"] == {"temperature": 0.7, "max_tokens": 8192}
    assert first["status"] == "ok" and first["finish_reason"] == "stop" and first["usage"]["total_tokens"] == 150
    assert {"text", "latency_s", "attempts", "finished_at"} <= set(first)
    # The prompts are the ones `kbv3 prompts` renders.
    sent = [r["body"]["messages"] for r in server.requests]
    assert (
        sent.count(to_messages(get_problem(SOFTMAX), "h100")) == 2
        and sent.count(to_messages(get_problem(GELU), "h100")) == 2
    )
    manifest = read_manifest(run / "solutions")
    assert manifest.model == "fake/model-7b" and manifest.split == "h100"
    files = {(e.problem_id, e.sample): e for e in manifest.entries}
    assert files[(SOFTMAX, 1)].file == f"{SOFTMAX}/sample_1.py"
    assert "class Model" in (run / "solutions" / SOFTMAX / "sample_0.py").read_text()
    assert files[(GELU, 0)].file is None and "no fenced code block" in files[(GELU, 0)].reason
    out = capsys.readouterr().out
    assert "4 samples" in out and "2 with code, 2 without" in out


def test_a_rerun_sends_only_what_is_missing(server, tmp_path):
    run = tmp_path / "run"
    assert generate(server, run) == 0 and len(server.requests) == 2
    assert generate(server, run) == 0 and len(server.requests) == 2  # nothing missing: nothing sent
    assert generate(server, run, "--samples", "3") == 0 and len(server.requests) == 6  # samples 1 and 2
    assert len(journal(run)) == 6 and len(read_manifest(run / "solutions").entries) == 6


def test_failed_requests_are_recorded_and_sent_again_on_a_rerun(server, tmp_path, capsys):
    run = tmp_path / "run"
    server.script = ["stall", "malformed"]
    assert generate(server, run, "--samples", "2", "--concurrency", "1", "--timeout", "0.3", "--retries", "0") == 1
    records = journal(run)
    assert [r["status"] for r in records[:2]] == ["error", "error"]
    assert records[0]["reason"].startswith("timeout") and "malformed" in records[1]["reason"]
    assert "2 request(s) failed: rerun the same command" in capsys.readouterr().out
    manifest = {(e.problem_id, e.sample): e for e in read_manifest(run / "solutions").entries}
    assert sum(e.reason.startswith("request failed") for e in manifest.values()) == 2  # a sample, without a solution
    sent = len(server.requests)
    assert generate(server, run, "--samples", "2", "--concurrency", "1", "--timeout", "5") == 0
    assert len(server.requests) == sent + 2  # only the two that failed
    manifest = {(e.problem_id, e.sample): e for e in read_manifest(run / "solutions").entries}
    assert not any(e.reason.startswith("request failed") for e in manifest.values())


def test_a_refusal_and_an_empty_answer_are_samples_without_a_solution(server, tmp_path):
    run = tmp_path / "run"
    server.script = ["refuse", "empty"]
    assert generate(server, run, "--concurrency", "1") == 0
    reasons = sorted(e.reason for e in read_manifest(run / "solutions").entries)
    assert reasons[0].startswith("empty answer") and reasons[1].startswith("refused")
    assert generate(server, run, "--concurrency", "1") == 0 and len(server.requests) == 2  # answers are final


def test_the_key_is_sent_but_found_in_no_file_and_no_output(server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KBV3_TEST_KEY", KEY)
    run = tmp_path / "run"
    # Error paths too: both first requests fail (no retries). Only those two: a 500 on the rerun
    # would be retried after a real backoff of up to a second (issue 41: the fast loop).
    server.script = ["500"] * 2
    assert generate(server, run, "--api-key-env", "KBV3_TEST_KEY", "--retries", "0") == 1
    assert generate(server, run, "--api-key-env", "KBV3_TEST_KEY", "--samples", "2") == 0
    assert server.requests and all(r["headers"]["Authorization"] == f"Bearer {KEY}" for r in server.requests)
    files = [p for p in run.rglob("*") if p.is_file()]
    assert len(files) >= 4
    for path in files:
        assert KEY.encode() not in path.read_bytes(), path
    out, err = capsys.readouterr()
    assert KEY not in out and KEY not in err


def test_a_journal_of_other_settings_and_bad_arguments_are_one_line_errors(server, tmp_path, capsys):
    run = tmp_path / "run"
    assert generate(server, run) == 0
    capsys.readouterr()
    assert generate(server, run, "--temperature", "0.9") == 2
    err = capsys.readouterr().err
    assert "temperature" in err and "RUN_DIR" in err and err.count("\n") == 1
    assert main(["generate", "--split", "h100", "--model", "m", "--base-url", server.base_url, "--out",
                 str(tmp_path / "r2"), "--only", "level1/23_Softmx"]) == 2  # fmt: skip
    assert "did you mean level1/23_Softmax" in capsys.readouterr().err
    assert main(["generate", "--split", "h100", "--model", "m", "--base-url", server.base_url, "--out",
                 str(tmp_path / "r3"), "--api-key-env", "KBV3_UNSET_VARIABLE_X"]) == 2  # fmt: skip
    assert "KBV3_UNSET_VARIABLE_X is not set" in capsys.readouterr().err
    assert main(["generate", "--split", "h100", "--model", "m", "--base-url", "127.0.0.1:8000", "--out",
                 str(tmp_path / "r4")]) == 2  # fmt: skip
    assert not (tmp_path / "r2").exists() and not (tmp_path / "r4").exists()


@pytest.mark.slow  # a subprocess (imports torch through the prompts)
def test_ctrl_c_keeps_every_response_that_arrived_and_exits_130(server, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.paths import REPO

    run = tmp_path / "run"
    server.stall_s = 60.0
    server.delay_after = 1  # the second request hangs until the interrupt
    command = [
        sys.executable, "-m", "kernelbench_v3", "generate", "--split", "h100", "--model", "m",
        "--base-url", server.base_url, "--only", f"{SOFTMAX},{GELU}", "--concurrency", "1",
        "--out", str(run), "--no-progress",
    ]  # fmt: skip
    process = subprocess.Popen(
        command,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # An earlier test's reported Ctrl-C leaves SIGINT ignored in this process, and a child keeps
        # an ignored SIGINT (Python then installs no KeyboardInterrupt handler): restore it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while len(server.requests) < 2 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        assert len(server.requests) == 2 and len(journal(run)) == 1
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)  # a request still in flight does not hold it open
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130 and "rerun the same command" in err
    assert [r["problem_id"] for r in journal(run)] == [SOFTMAX]
    assert [e.file for e in read_manifest(run / "solutions").entries] == [f"{SOFTMAX}/sample_0.py"]
