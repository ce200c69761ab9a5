"""The prep witness in each mode: a slow write of the inputs before the solution's calls fails
the solution under MPS (`work_before_window`), and without MPS leaves its time unresolved with
the reason named (a call armed on several streams holds a time slice, as work would), never a
number and never a rejection of the honest two-stream softmax (docs/timing.md)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kernelbench_v3.evaluate import mps
from kernelbench_v3.evaluate.supervisor.timing import solution
from kernelbench_v3.evaluate.supervisor.timing.measure import CallTimes
from kernelbench_v3.evaluate.supervisor.timing.resolution import UNRESOLVED
from kernelbench_v3.evaluate.supervisor.timing.witness import WORK_BEFORE_WINDOW


def _finished(monkeypatch, under_mps: bool, prep_s: float, net_s: float) -> solution.TimingOutcome:
    monkeypatch.setattr(mps, "in_use", lambda: under_mps)
    n = 40
    calls = CallTimes(
        nets=[net_s] * n,
        windows=[net_s + 150e-6] * n,
        echo_windows=[150e-6] * n,
        arms=[3e-4] * n,
        echo_arms=[3e-4] * n,
        preps=[prep_s] * n,  # the plain lease's two-stream softmax: 1.56 ms against 0.149
        echo_preps=[149e-6] * n,
        after=[206e-6] * n,
        after_echo=[206e-6] * n,
    )
    work = SimpleNamespace(cuda=True, echo_call_s=3.6e-6, echo_kernel_s=1e-6, idle_flush_s=200e-6, l2_bytes=50 << 20)
    rig = SimpleNamespace(work=work, gate="wait", echo="graph")
    judging = SimpleNamespace(failures=[], verified=n, share=1.0, calls_needed=lambda: 0)
    memory = SimpleNamespace(out_nbytes=1 << 20, count=8)
    outcome = solution.TimingOutcome()
    solution._finish(outcome, calls, judging, memory, rig, "cuda", True, [])
    return outcome


@pytest.mark.parametrize("net_s", [7e-6, 400e-6])  # under the plain gate's floor, and over it
def test_without_mps_a_slow_prep_leaves_the_time_unresolved_and_the_solution_standing(monkeypatch, net_s):
    outcome = _finished(monkeypatch, under_mps=False, prep_s=1.564e-3, net_s=net_s)
    assert WORK_BEFORE_WINDOW not in outcome.flags and not outcome.gap_reasons
    assert UNRESOLVED in outcome.flags and outcome.stats["unresolved"].startswith(UNRESOLVED)
    assert outcome.details["prep"]["solution_ms"] == pytest.approx(1.564)
    if net_s > 150e-6:  # resolved by size, unresolved by the witness: the prep's figures named
        assert "1.564 ms against 0.149 ms" in outcome.stats["unresolved"]
        assert "several streams" in outcome.stats["unresolved"] and "MPS" in outcome.stats["unresolved"]


def test_under_mps_a_slow_prep_still_fails_the_solution(monkeypatch):
    outcome = _finished(monkeypatch, under_mps=True, prep_s=1.564e-3, net_s=400e-6)
    assert WORK_BEFORE_WINDOW in outcome.flags and "before its window opened" in outcome.gap_reasons[WORK_BEFORE_WINDOW]
    assert not outcome.stats["unresolved"]


def test_a_prep_within_its_bound_changes_nothing_in_either_mode(monkeypatch):
    for under_mps in (False, True):
        outcome = _finished(monkeypatch, under_mps=under_mps, prep_s=150e-6, net_s=400e-6)
        assert outcome.flags == [] and not outcome.stats["unresolved"]
