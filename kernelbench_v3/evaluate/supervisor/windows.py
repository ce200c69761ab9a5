"""The per-call time from windows of k calls: the estimator and its stopping rule.

A window is k calls run back to back and timed as a whole, from the moment the calls may start
to the moment their outputs are where the timer owns them. Its time is a fixed cost (the request,
its reply, a synchronization, a snapshot) plus k per-call costs, so the slope of window time over
k is the per-call time with the fixed cost removed (Criterion.rs's linear sampling). Pure
arithmetic: the supervisor (`clock`) and the baseline child (`baseline`) time their windows and
hand the (k, seconds) points here, after one shared sizing sequence (`size_windows`).

A round is one window of each size, in a random order. Each round gives a slope of its own; the
estimate is the slope through the per-size lower quartiles of all rounds: what delays a window
(the other process being scheduled, a context switch on the GPU) only ever adds time, so the
lower quartile follows the calls' own cost while a quarter of the windows would have to be
skipped work, each with its even chance of being verified, to move it. Its standard error comes
from the spread of the round slopes. Timing stops when that error
is below `target_rel` of the estimate (nvbench's `stdrel`, GPU MODE's 0.1% of the mean) after
`min_rounds`, or when the clock's cap is reached.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

SCALE_MEDIAN_SE = 1.2533  # the standard error of a median is this times that of a mean
QUANTILE = 0.25  # of each size's window times, the one the estimate goes through


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True)
class WindowPlan:
    sizes: tuple[int, ...]  # the window sizes k of one round
    min_rounds: int = 3
    max_rounds: int = 400
    target_rel: float = 0.003  # stop when the slope's standard error is this fraction of it
    cap_s: float = 10.0  # the most seconds of windows, by the timer's clock

    def __post_init__(self) -> None:
        if len(set(self.sizes)) < 2 or min(self.sizes) < 1:
            raise ValueError(f"a window plan needs at least two distinct sizes >= 1, got {self.sizes}")


def slope(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares (slope, intercept) of seconds over k."""
    n = len(points)
    if n < 2:
        raise ValueError("a slope needs two points")
    mk = sum(k for k, _ in points) / n
    mt = sum(t for _, t in points) / n
    sxx = sum((k - mk) ** 2 for k, _ in points)
    if sxx == 0:
        raise ValueError("a slope needs two distinct window sizes")
    b = sum((k - mk) * (t - mt) for k, t in points) / sxx
    return b, mt - b * mk


@dataclass
class WindowFit:
    per_call_s: float
    fixed_s: float
    rel_se: float
    rounds: int
    windows: int
    round_slopes_s: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "per_call_ms": self.per_call_s * 1e3,
            "fixed_ms": round(self.fixed_s * 1e3, 6),
            "rel_se": round(self.rel_se, 6) if math.isfinite(self.rel_se) else None,
            "rounds": self.rounds,
            "windows": self.windows,
        }


def fit(rounds: Sequence[Sequence[tuple[int, float]]]) -> WindowFit:
    """The estimate from complete rounds of (k, seconds) windows."""
    by_size: dict[int, list[float]] = {}
    for points in rounds:
        for k, t in points:
            by_size.setdefault(k, []).append(t)
    lower = [(k, _quantile(ts, QUANTILE)) for k, ts in sorted(by_size.items())]
    per_call, fixed = slope(lower)
    round_slopes = [slope(points)[0] for points in rounds if len({k for k, _ in points}) >= 2]
    if len(round_slopes) >= 2 and per_call > 0:
        se = SCALE_MEDIAN_SE * statistics.stdev(round_slopes) / math.sqrt(len(round_slopes))
        rel = se / per_call
    else:
        rel = math.inf
    return WindowFit(per_call, fixed, rel, len(rounds), sum(len(p) for p in rounds), round_slopes)


def known(estimate: WindowFit, plan: WindowPlan) -> bool:
    return estimate.rounds >= plan.min_rounds and estimate.per_call_s > 0 and estimate.rel_se <= plan.target_rel


def window_sizes(max_calls: int, unit: int, count: int = 4) -> tuple[int, ...]:
    """`count` sizes that are multiples of `unit`, up to `max_calls` (a multiple of unit)."""
    step = max(unit, (max_calls // count) // unit * unit)
    sizes = tuple(sorted({min(max_calls, step * i) for i in range(1, count + 1)}))
    return sizes if len(sizes) >= 2 else (unit, 2 * unit)


def probe_per_call(run: Callable[[int], float], capacity: int, calls: int = 8) -> float:
    """An upper bound of one call's cost from eager windows of 1 and `calls` calls (before any
    graph is captured; the difference removes the window's fixed cost)."""
    one = min(run(1) for _ in range(3))
    if capacity < 2:
        return one
    k = min(calls, capacity)
    many = min(run(k) for _ in range(2))
    return max((many - one) / (k - 1), one / 50, 1e-6)


def choose_sets(probe_s: float, capacity: int, max_sets: int, largest_window_s: float) -> tuple[int, int]:
    """(sets, calls per graph): as many sets as the largest window's calls should take
    `largest_window_s` (by `probe_s`, one call's upper bound), within the memory's `capacity`;
    a multiple of four, so the four window sizes are 1..4 graphs of `sets // 4` calls."""
    sets = int(min(capacity, max_sets, max(4, largest_window_s / max(probe_s, 1e-6))))
    if sets < 4:
        return 2, 1
    sets = sets // 4 * 4
    return sets, sets // 4


@dataclass(frozen=True)
class Sizing:
    """How one timing's windows are laid out, chosen before any window is scored."""

    probe_s: float  # an upper bound of one call's cost, from eager windows
    sets: int  # input sets and output slots the calls rotate over
    unit: int  # calls per captured graph (1 when the calls run eagerly)
    sizes: tuple[int, ...]  # the window sizes of one round
    graphs: bool  # the calls are replayed from CUDA graphs


def size_windows(
    run: Callable[[int], float],
    capacity: int,
    *,
    device: str,
    max_sets: int,
    largest_window_s: float,
    capture: Callable[[int, int], bool] | None = None,
) -> Sizing:
    """The one sizing sequence the solution's clock and the baseline share: probe one call's cost
    with eager windows (`run(k)` times k calls), choose the sets, capture graphs of `unit` calls
    where `capture(sets, unit)` can (CUDA), and derive the window sizes. On CPU the windows are
    one and two calls: interpreted kernels are slow, and the figure is no performance figure."""
    probe = probe_per_call(run, capacity)
    sets, unit = choose_sets(probe, capacity, max_sets, largest_window_s)
    graphs = device == "cuda" and capture is not None and capture(sets, unit)
    if device != "cuda":
        return Sizing(probe, sets, unit, (1, 2), False)
    if not graphs:
        unit = 1
    return Sizing(probe, sets, unit, window_sizes(sets, unit), graphs)


def measure(
    run: Callable[[int, int], float],
    sizes: Sequence[int],
    plan: WindowPlan,
    rng: random.Random,
    after_round: Callable[[int], None] | None = None,
) -> tuple[WindowFit, list[list[tuple[int, float]]], float]:
    """Warm windows (one of each size, not timed), then rounds of windows in random orders until
    the estimate is known or the cap is reached; `run(k, round)` times one window of k calls
    (round -1: warm-up). Returns the estimate, the rounds and the seconds the rounds took."""
    for k in sizes:
        run(k, -1)
    rounds: list[list[tuple[int, float]]] = []
    started = time.perf_counter()
    while True:
        order = list(sizes)
        rng.shuffle(order)
        rounds.append([(k, run(k, len(rounds))) for k in order])
        if after_round is not None:
            after_round(len(rounds))
        estimate = fit(rounds)
        elapsed = time.perf_counter() - started
        if len(rounds) >= 2 and (known(estimate, plan) or elapsed > plan.cap_s or len(rounds) >= plan.max_rounds):
            return estimate, rounds, elapsed
