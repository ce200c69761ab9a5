"""Timing: summary statistics, stopping rules, the CPU timing loop, clock settling, the timing plan."""

from __future__ import annotations

import time

import pytest
import torch

from kernelbench_v3.evaluate import fresh as F
from kernelbench_v3.evaluate import timing


def test_summary_statistics_and_stability_rule():
    stats = timing.timing_stats([1.0, 2.0, 3.0, 4.0, 5.0], "cpu_wall_clock")
    assert (stats.median_ms, stats.p10_ms, stats.p90_ms, stats.reps) == (3.0, 1.4, 4.6, 5)
    assert stats.cv == pytest.approx((2.0**0.5) / 3.0)
    assert timing.is_stable([1.0] * 30, batch=10, rel=0.002)
    assert not timing.is_stable([1.0] * 10 + [2.0] * 20, batch=10, rel=0.002)
    assert not timing.is_stable([1.0] * 10, batch=10, rel=0.002)


def test_cuda_stopping_rule_wants_a_narrow_confidence_interval_not_a_still_median():
    import random

    rng = random.Random(0)
    # Timer ticks: a median stuck on one tick looks "still" to the CPU rule, yet half the samples
    # lie 5% away; the confidence interval says the median is not known to 0.3%.
    ticky = [16.0 + 0.8 * rng.randint(-1, 1) for _ in range(40)]
    assert timing.median_ci_rel(ticky) > 0.003
    tight = [16.0 * (1 + rng.gauss(0, 0.01)) for _ in range(4000)]
    assert timing.median_ci_rel(tight) < 0.002  # ~1% noise, 4000 samples: known to ~0.04%
    assert timing.median_ci_rel(tight[:100]) > timing.median_ci_rel(tight)
    assert timing.median_ci_rel([1.0] * 5) == float("inf")  # too few samples to say


def test_cpu_timing_rotates_sets_and_returns_each_sets_last_output():
    sets = [[torch.full((3,), float(i))] for i in range(3)]
    calls = []

    def call(args):
        calls.append(float(args[0][0]))
        return args[0] * 2

    stats, last = timing.time_cpu(
        call,
        sets,
        timing.TimingPlan(warmup=1, min_reps=4, max_reps=7, batch=1, stable_rel=0.0, max_seconds=5, wall_reps=0),
    )
    assert stats.method == "cpu_wall_clock" and 4 <= stats.reps <= 7
    assert set(calls) == {0.0, 1.0, 2.0}
    assert [float(t[0]) for t in last] == [0.0, 2.0, 4.0]


def test_clock_settling_waits_for_the_clock_to_stop_rising_within_a_time_limit():
    readings = iter([400.0, 900.0, 1500.0, 1960.0, 1980.0, 1000.0])
    busy = []
    assert timing.settle_clock(lambda: next(readings), lambda: busy.append(1), max_seconds=10) == 1980.0
    assert len(busy) == 4  # the first reading, then one busy spell before each later reading
    rising = iter(range(1, 10**6))
    started = time.perf_counter()
    assert timing.settle_clock(lambda: float(next(rising)) ** 2, lambda: time.sleep(0.01), max_seconds=0.1) > 1
    assert time.perf_counter() - started < 1.0  # gives up at the limit, returning the last reading


def test_cpu_timing_on_fresh_inputs_exposes_a_content_cache():
    sets = [[torch.randn(64)] for _ in range(2)]
    fresh = F.FreshInputs(sets, [torch.randn(64)], [torch.randn(64)])
    cache = {}

    def content_cached(args):
        key = args[0].numpy().tobytes()
        if key not in cache:
            deadline = time.perf_counter() + 0.004  # the "work"
            while time.perf_counter() < deadline:
                pass
            cache[key] = args[0] * 2
        return cache[key].clone()

    plan = timing.TimingPlan(warmup=1, min_reps=6, max_reps=10, batch=1, stable_rel=0.0, max_seconds=5, wall_reps=0)
    stats, last = timing.time_cpu(content_cached, sets, plan, fresh=fresh)
    verdict = stats.details["input_reuse"]
    assert verdict["faster_on_repeated_inputs"] and "faster_on_repeated_inputs" in stats.flags
    assert stats.median_ms >= 4.0 and verdict["repeated_median_ms"] < 1.0  # reported: the fresh time
    assert torch.equal(fresh.final_output, fresh.final[0] * 2) and torch.equal(last[1], sets[1][0] * 2)
    honest, _ = timing.time_cpu(lambda a: a[0] * 2, sets, plan, fresh=F.FreshInputs(sets, sets[0], sets[1]))
    ok = F.reuse_verdict([1.0, 1.1, 0.9, 1.2], [1.0, 0.95, 1.05])
    assert not ok["faster_on_repeated_inputs"] and "input_reuse" in honest.details
    noisy = F.reuse_verdict([3.0, 3.1, 0.9, 0.95, 3.2], [1.0, 1.05, 1.1])  # slower median, but overlapping
    assert not noisy["faster_on_repeated_inputs"]


def test_a_timing_plan_rejects_an_unknown_flush_mode():
    with pytest.raises(ValueError, match="l2_flush"):
        timing.TimingPlan(l2_flush="evict")


@pytest.mark.parametrize("passes", [0, -1, 1.5, "2"])
def test_a_timing_plan_rejects_a_flush_pass_count_below_one_or_not_an_integer(passes):
    with pytest.raises(ValueError, match="l2_flush_passes"):
        timing.TimingPlan(l2_flush_passes=passes)


def test_the_default_flush_reads_twice():
    # One read after the evaluator's own writes (output copy, fresh inputs) left 12-15 us kernels
    # up to 9% apart between processes on an H200; two brought them under 1% (placement_gpu.md).
    plan = timing.TimingPlan()
    assert (plan.l2_flush, plan.l2_flush_passes) == ("read", 2)
