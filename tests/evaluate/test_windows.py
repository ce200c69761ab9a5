"""The window estimator (slope of window time over k) and the sizing sequence the solution's
clock and the baseline share, on synthetic windows: no process, no device."""

from __future__ import annotations

import random
import time

import pytest

from kernelbench_v3.evaluate.supervisor.clock import ClockPlan
from kernelbench_v3.evaluate.supervisor.windows import (
    WindowPlan,
    choose_sets,
    fit,
    known,
    measure,
    size_windows,
    slope,
    window_sizes,
)

PER_CALL = 20e-6  # a 20 us call
FIXED = 300e-6  # the request, the reply and the snapshot of one window


def synthetic(rng: random.Random, delayed: float = 0.0):
    """Windows that cost FIXED + k x PER_CALL with 1% jitter, and a `delayed` share of them
    delayed by up to a millisecond (a context switch, the other process being scheduled)."""

    def run(k: int, _round: int = 0) -> float:
        t = (FIXED + k * PER_CALL) * (1 + rng.uniform(-0.01, 0.01))
        if rng.random() < delayed:
            t += rng.uniform(1e-4, 1e-3)
        return t

    return run


def test_the_slope_of_exact_windows_is_the_per_call_time():
    per_call, fixed = slope([(k, FIXED + k * PER_CALL) for k in (16, 32, 48, 64)])
    assert per_call == pytest.approx(PER_CALL) and fixed == pytest.approx(FIXED)
    with pytest.raises(ValueError, match="two distinct"):
        slope([(8, 1.0), (8, 2.0)])


def test_delayed_windows_do_not_move_the_estimate():
    # Delays only ever add time; the lower quartile of each size follows the calls' own cost.
    rng = random.Random(1)
    run = synthetic(rng, delayed=0.2)
    rounds = [[(k, run(k)) for k in (16, 32, 48, 64)] for _ in range(40)]
    estimate = fit(rounds)
    assert estimate.per_call_s == pytest.approx(PER_CALL, rel=0.02)
    assert estimate.rounds == 40 and estimate.windows == 160


def test_measure_stops_when_known_but_not_before_the_plans_rounds():
    sizes = (16, 32, 48, 64)
    plan = WindowPlan(sizes, min_rounds=8, target_rel=0.05, cap_s=60.0)
    estimate, rounds, _ = measure(synthetic(random.Random(2)), sizes, plan, random.Random(3))
    assert len(rounds) == 8 and known(estimate, plan)
    assert estimate.per_call_s == pytest.approx(PER_CALL, rel=0.02)


def test_measure_stops_at_its_cap_when_the_estimate_stays_unknown():
    sizes = (1, 2)
    plan = WindowPlan(sizes, min_rounds=2, target_rel=1e-9, cap_s=0.05)
    estimate, rounds, elapsed = measure(synthetic(random.Random(4)), sizes, plan, random.Random(5))
    assert not known(estimate, plan) and elapsed > plan.cap_s and len(rounds) >= 2


def test_every_round_runs_every_size_in_its_own_order():
    seen: list[int] = []

    def run(k: int, round_index: int) -> float:
        if round_index >= 0:
            seen.append(k)
        return FIXED + k * PER_CALL

    sizes = (4, 8, 12, 16)
    _, rounds, _ = measure(run, sizes, WindowPlan(sizes, min_rounds=6, target_rel=1.0), random.Random(6))
    assert all(sorted(k for k, _ in r) == list(sizes) for r in rounds)
    assert len({tuple(k for k, _ in r) for r in rounds}) > 1  # shuffled, not one fixed order


def test_sets_are_a_multiple_of_four_and_sizes_multiples_of_the_graph():
    sets, unit = choose_sets(probe_s=PER_CALL, capacity=256, max_sets=256, largest_window_s=0.05)
    assert sets == 256 and unit == 64
    sets, unit = choose_sets(probe_s=1e-3, capacity=256, max_sets=256, largest_window_s=0.05)
    assert (sets, unit) == (48, 12)  # 50 calls of 1 ms fill the largest window; rounded down to 4s
    assert choose_sets(probe_s=1.0, capacity=256, max_sets=256, largest_window_s=0.05) == (4, 1)  # a slow call
    assert choose_sets(probe_s=PER_CALL, capacity=3, max_sets=256, largest_window_s=0.05) == (2, 1)  # little memory
    assert window_sizes(48, 12) == (12, 24, 36, 48)
    assert window_sizes(48, 1) == (12, 24, 36, 48)
    assert window_sizes(2, 1) == (1, 2)


def _probe(k: int) -> float:
    return FIXED + k * PER_CALL


def test_the_sizing_sequence_captures_graphs_on_cuda_only():
    captured: list[tuple[int, int]] = []

    def capture(sets: int, unit: int) -> bool:
        captured.append((sets, unit))
        return True

    on_cpu = size_windows(_probe, 2, device="cpu", max_sets=2, largest_window_s=0.05, capture=capture)
    assert on_cpu.sizes == (1, 2) and not on_cpu.graphs and captured == []
    on_cuda = size_windows(_probe, 256, device="cuda", max_sets=256, largest_window_s=0.05, capture=capture)
    assert captured == [(256, 64)] and on_cuda.graphs and on_cuda.sizes == (64, 128, 192, 256)
    assert on_cuda.probe_s == pytest.approx(PER_CALL, rel=0.01)


def test_calls_that_cannot_be_captured_run_eagerly_one_at_a_time():
    eager = size_windows(_probe, 256, device="cuda", max_sets=256, largest_window_s=0.05, capture=lambda s, u: False)
    assert not eager.graphs and eager.unit == 1 and eager.sizes == (64, 128, 192, 256)
    never = size_windows(_probe, 256, device="cuda", max_sets=256, largest_window_s=0.05)
    assert not never.graphs and never.unit == 1


def test_the_baseline_stops_by_the_solutions_rule(monkeypatch):
    # The baseline and the solution are timed under one plan, so a speedup compares like with
    # like: a plan of at least 5 rounds that is always known stops the baseline at 5 exactly.
    import torch

    from kernelbench_v3.evaluate.supervisor import baseline, clock

    def five_rounds(device: str, cap_s: float) -> ClockPlan:
        return ClockPlan(device, cap_s, 1.0, 5, 0.05, 2, 1, 2.0, 1.0)

    monkeypatch.setattr(clock.ClockPlan, "for_device", staticmethod(five_rounds))

    class Problem:
        @staticmethod
        def get_inputs():
            return [torch.randn(64)]

    def slow_relu(x):  # a call that costs far more than the noise, so the slope is always positive
        time.sleep(0.002)
        return torch.relu(x)

    result = baseline.time_windows(slow_relu, Problem, Problem.get_inputs(), "cpu", 30.0, graphs=False)
    assert result["fit"]["rounds"] == 5 and result["window_sizes"] == [1, 2]
