"""A process's whole wall clock (`evaluate.wall`): every moment in one named part, the
evaluation's own phases in their place, the parts adding up to `wall_s`; on a fake clock (no
measured time is asserted)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kernelbench_v3.evaluate import Record, wall
from tests.fakes import FakeClock
from tests.paths import REPO


def test_every_moment_is_in_one_part_and_the_evaluation_is_its_own_phases():
    clock = FakeClock(100.0)
    w = wall.Wall(clock=clock, started=99.0)  # 1 s before the timer was made: the import
    w.to("cli_args")
    clock.now += 0.25
    with w.step("zygote_launch"):
        clock.now += 0.01
    clock.now += 0.05  # back in cli_args after the block
    w.to(wall.EVALUATION)
    clock.now += 10.0
    w.to("teardown")
    clock.now += 0.5
    record = Record(
        duration_s=9.9,
        phase_s={
            "setup": 0.1,
            "reference_build": 0.5,
            "reference_inputs": 1.5,
            "reference": 2.0,
            "solution_zygote_wait": 1.0,
            "solution_spawn": 0.4,
            "solution_timing": 5.0,
            "candidate": 6.4,
            "verdict": 0.3,
            "cleanup": 0.1,
            "bookkeeping": 1.0,
        },
        wall_background_s={"baseline_compile": 4.0},  # the evaluation's own: its baseline child beside the reference
    )
    w.beside("zygote_start", 3.2)
    w.beside("mps_probe", None)  # nothing ran: nothing said
    w.finish(record)
    assert record.wall_s == 11.81
    assert list(record.wall_phase_s) == [
        "cli_import",
        "cli_args",
        "zygote_launch",
        "setup",
        "reference_build",
        "reference_inputs",
        "solution_zygote_wait",
        "solution_spawn",
        "solution_timing",
        "verdict",
        "cleanup",
        "bookkeeping",
        "evaluate_call",
        "teardown",
        "unattributed",
    ]
    assert record.wall_phase_s["cli_import"] == 1.0 and record.wall_phase_s["cli_args"] == 0.3
    assert "candidate" not in record.wall_phase_s and "reference" not in record.wall_phase_s  # steps stand in
    # The evaluation lap (10 s) less its phases (9.9 s) is the call around run_evaluation.
    assert record.wall_phase_s["evaluate_call"] == pytest.approx(0.1)
    assert record.wall_phase_s["unattributed"] == 0.0
    assert sum(record.wall_phase_s.values()) == pytest.approx(record.wall_s, abs=1e-9)
    assert record.wall_background_s == {"baseline_compile": 4.0, "zygote_start": 3.2}


def test_a_split_gives_the_wait_to_what_another_thread_was_still_doing():
    clock = FakeClock(100.0)
    w = wall.Wall("mps_daemon", clock=clock)
    clock.now += 2.0
    w.split(100.5, "mps_probe")  # the daemon answered 0.5 s into the wait, the probe took the rest
    w.to("device_probe")
    assert w.seconds == {"mps_daemon": 0.5, "mps_probe": 1.5}
    clock.now += 1.0
    w.split(50.0, "later")  # noted before this step began: the step had nothing to wait for
    assert w.seconds["device_probe"] == 0.0 and w.current == "later"
    clock.now += 1.0
    w.split(None, "x")  # never noted: all of it the current step's
    assert w.seconds["later"] == 2.0


def test_evaluation_parts_keep_steps_without_their_total_and_order():
    parts = wall.evaluation_parts({"reference": 1.0, "solution_cases": 2.0, "verdict": 0.5})
    assert list(parts) == ["reference", "verdict", "solution_cases"]
    assert wall.breakdown({"a": 1.0}, {}, 0.9) == {"a": 1.0, "unattributed": -0.1}  # an overlap shows, signed
    # An evaluation whose record has no phases (a service's error record): all of it is the call.
    assert wall.breakdown({"evaluation": 2.0}, {}, 2.0) == {"evaluate_call": 2.0, "unattributed": 0.0}


def test_the_process_start_counts_what_ran_before_any_code_of_ours():
    script = (
        "import time; time.sleep(0.4)\n"
        "from kernelbench_v3.evaluate.wall import process_started\n"
        "print(time.monotonic() - process_started())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) >= 0.39  # at least the sleep before the module was imported (ticks round down)


def test_without_proc_the_start_is_now(monkeypatch):
    def no_proc(*args, **kwargs):
        raise OSError("no /proc here")

    monkeypatch.setattr("builtins.open", no_proc)
    assert wall.process_started(FakeClock(7.0)) == 7.0
