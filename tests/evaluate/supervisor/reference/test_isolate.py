"""Children run by `isolate` with a wall-clock limit and a bounded log."""

from __future__ import annotations

import pytest

from kernelbench_v3.evaluate.supervisor.reference.isolate import run_child


@pytest.mark.slow
def test_isolated_child_reports_a_bad_role(tmp_path):
    outcome = run_child("no_such_role", tmp_path, {}, timeout_s=60)
    assert (
        outcome.result is not None and outcome.result["ok"] is False and "unknown child role" in outcome.result["error"]
    )


def _stand_in_interpreter(tmp_path, monkeypatch, body: str):
    """Launch `body` (a shell script; $4 is the child's folder) where the child's interpreter
    would run, so a child that sleeps or writes its result costs no torch import."""
    import stat

    from kernelbench_v3.evaluate.supervisor.reference import isolate

    script = tmp_path / "stand_in_python"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(isolate.sys, "executable", str(script))


def test_a_stopped_child_is_killed_and_says_so(tmp_path, monkeypatch):
    import threading

    _stand_in_interpreter(tmp_path, monkeypatch, "exec sleep 600")
    (tmp_path / "child").mkdir()
    stop = threading.Event()
    stop.set()  # asked before the child could do anything: the wait ends at once
    outcome = run_child("baseline", tmp_path / "child", {}, timeout_s=600, stop=stop)
    assert outcome.stopped and not outcome.timed_out and outcome.result is None
    assert "stopped by its caller" in outcome.reason and outcome.returncode is not None  # reaped


@pytest.mark.slow
def test_a_childs_limit_does_not_run_while_its_caller_holds_what_it_waits_for(tmp_path, monkeypatch):
    import threading

    body = 'sleep 1; printf \'{"ok": true}\' > "$4/result_baseline.json"'
    _stand_in_interpreter(tmp_path, monkeypatch, body)
    (tmp_path / "child").mkdir()
    held = threading.Event()
    held.set()  # never released in this test: the 0.1 s limit never starts
    outcome = run_child("baseline", tmp_path / "child", {}, timeout_s=0.1, pause_limit=held)
    assert not outcome.timed_out and outcome.result == {"ok": True}, outcome.reason
    unpaused = run_child("baseline", tmp_path / "child", {}, timeout_s=0.1)
    assert unpaused.timed_out and unpaused.result is None
