"""The timing room's one setup (`rig.Rig`) and one summary (`rig.Figures`), which both entries
use: `time_solution` for a solution, `time_reference` for its baseline. No measured time is
asserted: the clock is injected, or only the report's form is checked."""

from __future__ import annotations

import itertools
import random
import types

import torch

from kernelbench_v3.evaluate.supervisor.timing import time_reference
from kernelbench_v3.evaluate.supervisor.timing.measure import WARM_CALLS, CallTimes
from kernelbench_v3.evaluate.supervisor.timing.memory import TimedMemory, set_bytes
from kernelbench_v3.evaluate.supervisor.timing.rig import Figures, Rig
from kernelbench_v3.evaluate.supervisor.timing.stats import CallPlan


def _module(shape=(2, 3)):
    """A problem module: `get_inputs()` under the global generators."""
    return types.SimpleNamespace(get_inputs=lambda: [torch.randn(*shape), 3])


def _memory(count=2, shape=(2, 3)):
    template = [torch.zeros(*shape), 3]
    region = torch.empty(count * set_bytes(template, 4 * shape[0] * shape[1]), dtype=torch.uint8)
    return TimedMemory(region, template, shape, torch.float32, count)


def test_the_rig_is_the_setup_both_sides_share():
    memory = _memory(count=2)
    rig = Rig(memory, _module(), seconds=4.0, rng=random.Random(0))
    assert rig.device == "cpu" and rig.plan == CallPlan.for_device("cpu", 4.0)
    # The decoy: one set laid out as the caller's, in memory of the timer's own.
    assert rig.decoy.count == 1 and rig.decoy.layout()["sets"][0] == memory.layout()["sets"][0]
    assert rig.decoy.region.data_ptr() != memory.region.data_ptr()
    assert rig.feed.sets == memory.count
    inputs = rig.feed.draw()  # fresh inputs under a seed of the rig's generator
    rig.feed.write(1, inputs)
    rig.feed.decoy(inputs)
    assert torch.equal(memory.sets[1][0], inputs[0]) and torch.equal(rig.decoy.sets[0][0], inputs[0])
    again = Rig(_memory(), _module(), seconds=4.0, rng=random.Random(0)).feed.draw()
    assert torch.equal(again[0], inputs[0])  # the seed comes from the rig's rng, nothing else


class _Caller:
    """A caller whose windows last `seconds` by the injected clock."""

    def __init__(self, clock, seconds):
        self.clock, self.seconds = clock, seconds

    def arm(self, set_index):
        return 0.0

    def ring(self):
        self.clock.now += self.seconds
        return self.seconds


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        self.now += 1e-6
        return self.now


def test_the_rig_times_through_measure_and_figures_summarise_it():
    clock = _Clock()
    rig = Rig(_memory(), _module(), seconds=60.0, rng=random.Random(1))
    calls = rig.measure(_Caller(clock, 3e-3), _Caller(clock, 1e-3), clock=clock)
    assert isinstance(calls, CallTimes) and len(calls.nets) == rig.plan.min_calls
    assert all(abs(n - 2e-3) < 1e-12 for n in calls.nets)  # the window less the echo's
    figures = Figures.of(calls, rig.work, "cpu")
    assert figures.method == "cpu" and figures.mps is False and figures.echo_call_ms == 0.0
    assert abs(figures.median_ms - 2.0) < 1e-9 and abs(figures.echo_window_ms - 1.0) < 1e-9
    assert figures.calls.calls == len(calls.nets)
    kept = rig.measure(_Caller(clock, 3e-3), _Caller(clock, 1e-3), subtract_echo=False, clock=clock)
    assert abs(kept.nets[0] - 3e-3) < 1e-12  # on the CPU the window is kept whole


def test_the_reference_is_timed_on_the_same_rig_and_reports_the_baseline_form():
    seen = itertools.count()

    def forward(x, k):
        next(seen)
        return x * k

    timed = time_reference(forward, _module(), [torch.zeros(2, 3), 3], "cpu", seconds=30.0)
    assert set(timed) == {
        "method",
        "median_ms",
        "calls",
        "not_gated_because",
        "mps",
        "gate",
        "echo",
        "echo_window_ms",
        "echo_call_ms",
        "calls_s",
    }
    assert timed["method"] == "cpu" and timed["not_gated_because"] == "" and timed["mps"] is False
    assert timed["gate"] == timed["echo"] == ""  # nothing held at a gate on the CPU
    plan = CallPlan.for_device("cpu", 30.0)
    assert plan.min_calls <= timed["calls"]["calls"] <= plan.max_calls
    # One call to learn the output's shape, the warm calls, then every scored call.
    assert next(seen) == 1 + WARM_CALLS + timed["calls"]["calls"]


def test_ctrl_c_while_timing_does_not_wait_for_the_echo_to_finish(monkeypatch):
    # Interrupted mid-window, the echo may be waiting for a GO that never comes: a polite
    # Finish would wait FINISH_LIMIT_S (10 s) before `kbv3 eval` could say "interrupted".
    from kernelbench_v3.evaluate.supervisor.timing import solution as timing_solution

    finished, closed = [], []
    echo = types.SimpleNamespace(finish=lambda: finished.append(True))
    arena = types.SimpleNamespace(close=lambda: closed.append(True))
    monkeypatch.setattr(
        timing_solution.TimedProcess, "of", staticmethod(lambda *a, **k: types.SimpleNamespace(view=None))
    )
    monkeypatch.setattr(timing_solution, "solution_memory", lambda *a: (None, {}))
    monkeypatch.setattr(timing_solution, "start_echo", lambda *a, **k: (echo, arena))
    ctx = types.SimpleNamespace(session=None, device="cpu", template=[], expected=None, cpu_region=(0, 0))
    ctx.start_process, ctx.work, ctx.window_limit_s, ctx.capture_limit_s = None, None, 1.0, 1.0

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(timing_solution, "_time", interrupted)
    try:
        timing_solution.time_solution(ctx, 1.0, random.Random(0))
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the interrupt was swallowed")
    assert (finished, closed) == ([], [True])

    def lost(*args):
        raise RuntimeError("a lost session")

    monkeypatch.setattr(timing_solution, "_time", lost)
    try:
        timing_solution.time_solution(ctx, 1.0, random.Random(0))
    except RuntimeError:
        pass
    assert finished == [True]  # otherwise the echo is let go politely, as before
