"""The solution process is stopped between timed windows (`Session.pause`), so nothing it runs
on the host can compute on the next window's inputs while the supervisor writes them."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelbench_v3.evaluate import EvalRequest, evaluate
from kernelbench_v3.evaluate.supervisor.session import Session
from tests.paths import EXAMPLES


def _state(pid: int) -> str:
    # /proc/<pid>/stat: "pid (comm) S ..."; the state follows the last ')'
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _wait_for(pid: int, states: str) -> str:
    deadline = time.monotonic() + 5
    while (state := _state(pid)) not in states and time.monotonic() < deadline:
        time.sleep(0.01)
    return state


class _Link:
    def __init__(self):
        self.sent = []

    def send(self, message):
        self.sent.append(message)

    def receive(self, timeout_s):
        return {"kind": "finished", "tampered": []}


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_a_paused_process_is_stopped_until_the_next_request():
    proc = subprocess.Popen(
        [sys.executable, "-c", "while True: pass"], start_new_session=True, stdin=subprocess.DEVNULL
    )
    try:
        session = Session(_Link(), None, 0, 0, 0, pid=proc.pid)
        session.pause()
        assert session.paused and _wait_for(proc.pid, "Tt") in "Tt"
        session.request({"kind": "finish"}, 5.0, ("finished",))  # any request resumes it first
        assert not session.paused and _wait_for(proc.pid, "R") == "R"
    finally:
        proc.kill()
        proc.wait()


def test_pausing_a_process_that_is_gone_is_harmless():
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    proc.wait()
    session = Session(_Link(), None, 0, 0, 0, pid=proc.pid)
    session.pause()
    assert not session.paused
    assert not Session(_Link(), None, 0, 0, 0).paused  # no pid: nothing to pause


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_every_window_after_the_first_finds_the_process_stopped(tmp_path, monkeypatch):
    from kernelbench_v3.evaluate.supervisor import clock

    seen: dict[int, list[str]] = {}  # solution (or echo) pid -> its state as each window opens
    real_run = clock.Windows.run

    def run(self, k, **kwargs):
        # The inputs of this window are about to be written: the last window's reply stopped it.
        seen.setdefault(self.session.pid, []).append(_wait_for(self.session.pid, "Tt"))
        return real_run(self, k, **kwargs)

    monkeypatch.setattr(clock.Windows, "run", run)
    request = EvalRequest(
        "level1/23_Softmax",
        EXAMPLES / "level1" / "23_Softmax.py",
        device="cpu",
        sizes={"batch_size": 4, "dim": 96},
        baseline=False,
        seeds=(42,),
        timing_seconds=1.0,
    )
    record = evaluate(request, cache_dir=tmp_path)
    assert record.correct, (record.failed_check, record.error)
    assert len(seen) == 2  # the solution and the trusted echo
    for states in seen.values():
        assert len(states) >= 3 and all(state in "Tt" for state in states[1:]), seen
