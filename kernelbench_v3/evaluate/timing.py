"""What every timer shares, and the CPU timer.

This module owns the timing vocabulary: `TimingPlan` (how hard to try), `TimingStats` (what a
timing reports), the stopping rules (`median_ci_rel` on CUDA, `is_stable` on CPU), the timing
flags the supervisor acts on, the clock-settling rule (`settle_clock`), and `Timer`, the pairing
of a repeated and a fresh call that CUDA and CPU timing both use. The CPU side lives here too:
`CpuTimer` and the local loop `time_cpu` (`time.perf_counter` around each call, the method
recorded as "cpu_wall_clock"). The CUDA timer and its loop are in `cuda_timing`.

Both loops accept `fresh` (a `fresh.FreshInputs`): then every call on a rotating (repeated) set
is followed by one on inputs never seen before, made outside the timed region. The reported
stats (median, stability) are those of the fresh calls; the repeated ones only feed the
comparison in `details["input_reuse"]` (a solution caching by input content is fast on repeats
only) and the flag "faster_on_repeated_inputs". The last fresh call is on `fresh.final`, its
output kept. In an evaluation the solution process's figures are only evidence: the supervisor
bounds them with its own clock (`clock`). How the method was arrived at: docs/timing.md.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .fresh import quantile  # also importable as timing.quantile, where it lived

Call = Callable[[Sequence[Any]], Any]


@dataclass
class TimingStats:
    method: str  # "cuda_events" | "cpu_wall_clock"
    median_ms: float
    p10_ms: float
    p90_ms: float
    mean_ms: float
    cv: float  # stdev / mean of the samples
    reps: int
    wall_ms: float | None = None  # synchronized wall clock per call, back-to-back loop
    flags: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def timing_stats(samples_ms: Sequence[float], method: str) -> TimingStats:
    if not samples_ms:
        raise ValueError("no timing samples")
    ordered = sorted(samples_ms)
    mean = statistics.fmean(ordered)
    stdev = statistics.pstdev(ordered) if len(ordered) > 1 else 0.0
    return TimingStats(
        method=method,
        median_ms=statistics.median(ordered),
        p10_ms=quantile(ordered, 0.10),
        p90_ms=quantile(ordered, 0.90),
        mean_ms=mean,
        cv=stdev / mean if mean > 0 else 0.0,
        reps=len(ordered),
    )


def is_stable(samples: Sequence[float], batch: int, rel: float) -> bool:
    """The median moved by less than `rel` when the newest batch was added (and the batch
    before that likewise)."""
    if len(samples) < 3 * batch:
        return False
    m_all = statistics.median(samples)
    m_1 = statistics.median(samples[:-batch])
    m_2 = statistics.median(samples[: -2 * batch])
    return abs(m_all - m_1) <= rel * m_all and abs(m_1 - m_2) <= rel * m_1


def median_ci_rel(samples: Sequence[float], z: float = 1.96) -> float:
    """Half the width of a distribution-free ~95% confidence interval of the median (order
    statistics n/2 -+ z*sqrt(n)/2), relative to the median; inf for too few samples.

    Unlike "the median stopped moving", this cannot be fooled by timer ticks: event times come
    in 32 ns steps, so the median of a 15 us kernel can sit still for batches while the
    distribution around it is still several percent wide."""
    n = len(samples)
    if n < 8:
        return math.inf
    ordered = sorted(samples)
    lo = max(0, math.floor(n / 2 - z * math.sqrt(n) / 2))
    hi = min(n - 1, math.ceil(n / 2 + z * math.sqrt(n) / 2))
    median = statistics.median(ordered)
    return (ordered[hi] - ordered[lo]) / (2 * median) if median > 0 else math.inf


def _clone_output(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return out.detach().clone()
    if isinstance(out, (list, tuple)):
        return type(out)(_clone_output(o) for o in out)
    return out


L2_FLUSH_MODES = ("write", "read", "write_read")


@dataclass(frozen=True)
class TimingPlan:
    """How hard to try: repetitions grow in `batch`es from `min_reps` until `max_reps` /
    `max_seconds` is reached or the median is known well enough: on CUDA, its ~95% confidence
    interval is within -+`stable_rel` of it and `min_seconds` have passed (so cheap kernels get
    hundreds of samples); on CPU, it moved by less than `stable_rel` over the last two batches."""

    warmup: int = 5
    warmup_seconds: float = 0.5  # CUDA only: keep calling for at least this long before timing
    min_reps: int = 30
    max_reps: int = 10_000
    batch: int = 10
    stable_rel: float = 0.003
    max_seconds: float = 20.0
    wall_reps: int = 20
    min_seconds: float = 1.0  # CUDA only
    clock_settle_seconds: float = 5.0  # CUDA only: the most spent waiting for the clock to settle
    # CUDA only: "read" (sum a buffer), "write" (zero it, as Triton's do_bench does) or "write_read".
    # A write leaves dirty lines whose write-back the timed call pays for (docs/timing.md, "L2 flush").
    l2_flush: str = "read"
    # CUDA only: how many times the flush runs before each timed call. One pass leaves part of what
    # was written just before it, and processes then settle into different timings; a second read
    # cleans it (docs/timing.md, "What is written before the flush").
    l2_flush_passes: int = 2

    def __post_init__(self) -> None:
        if self.l2_flush not in L2_FLUSH_MODES:
            raise ValueError(f"TimingPlan.l2_flush must be one of {L2_FLUSH_MODES}, got {self.l2_flush!r}")
        if not isinstance(self.l2_flush_passes, int) or self.l2_flush_passes < 1:
            raise ValueError(f"TimingPlan.l2_flush_passes must be an integer >= 1, got {self.l2_flush_passes!r}")


CUDA_PLAN = TimingPlan()
CPU_PLAN = TimingPlan(warmup=1, min_reps=3, max_reps=50, batch=1, stable_rel=0.02, max_seconds=3.0, wall_reps=0)


def time_cpu(
    call: Call, sets: Sequence[Sequence[Any]], plan: TimingPlan = CPU_PLAN, fresh: Any = None
) -> tuple[TimingStats, list[Any]]:
    """Wall-clock timing on the CPU; returns the stats and the last output of each input set."""
    perf = time.perf_counter
    last: list[Any] = [None] * len(sets)
    for i in range(plan.warmup):
        call(sets[i % len(sets)])
    samples: list[float] = []
    repeated: list[float] = []
    started = perf()
    i = 0
    while True:
        k = i % len(sets)
        t0 = perf()
        out = call(sets[k])
        (samples if fresh is None else repeated).append((perf() - t0) * 1e3)
        last[k] = _clone_output(out)
        if fresh is not None:
            args = fresh.next()
            t0 = perf()
            call(args)
            samples.append((perf() - t0) * 1e3)
        i += 1
        done = len(samples) >= plan.min_reps and is_stable(samples, plan.batch, plan.stable_rel)
        if i >= len(sets) and (done or len(samples) >= plan.max_reps or perf() - started > plan.max_seconds):
            break
    if fresh is not None:
        t0 = perf()
        out = call(fresh.final)
        samples.append((perf() - t0) * 1e3)
        fresh.final_output = _clone_output(out)
    stats = timing_stats(samples, "cpu_wall_clock")
    stats.details["note"] = "wall clock of the CPU process; under TRITON_INTERPRET=1 not a GPU-speed figure"
    if fresh is not None:
        _compare_reuse(stats, samples, repeated, ratio=CPU_REUSE_RATIO)
    return stats, last


# CPU wall clock on a shared machine (CI, 2 cores) is noisy enough to time an honest interpreted
# kernel far slower on fresh inputs than on repeats; a content cache is faster by orders of
# magnitude, so the CPU threshold is wider than the CUDA one (fresh.REUSE_RATIO).
CPU_REUSE_RATIO = 5.0
CLOCK_CHANGE_REL = 0.10  # the SM clock after timing differs from before by more: flag the timing
# Timing flags that the supervisor acts on.
CLOCK_CHANGED = "sm_clock_changed"  # the SM clock moved by over CLOCK_CHANGE_REL while timing
ESCAPED_STREAM = "wall_clock_exceeds_events"  # work ran outside the timed stream


def _compare_reuse(
    stats: TimingStats, fresh_ms: list[float], repeated_ms: list[float], ratio: float | None = None
) -> None:
    from .fresh import REUSE_RATIO, reuse_verdict

    stats.details["timed_inputs"] = "fresh (a never-seen blend before each call); repeated sets in input_reuse"
    stats.details["input_reuse"] = verdict = reuse_verdict(fresh_ms, repeated_ms, ratio or REUSE_RATIO)
    if verdict["faster_on_repeated_inputs"]:
        stats.flags.append("faster_on_repeated_inputs")


def settle_clock(
    measure: Callable[[], float], keep_busy: Callable[[], None], max_seconds: float, rel: float = 0.02
) -> float:
    """Keep the GPU busy until the clock `measure()` reports stops rising by more than `rel`
    between two looks, or `max_seconds` pass; returns the last reading. A GPU that was idle can
    sit at a fraction of its clock for a while, and everything timed then is slow by that factor."""
    deadline = time.perf_counter() + max_seconds
    clock = measure()
    while time.perf_counter() < deadline:
        keep_busy()
        again = measure()
        if again <= clock * (1.0 + rel):
            return again
        clock = again
    return clock


class Timer:
    """What CUDA and CPU timing share: the pairing of a repeated and a fresh call, and calls back
    to back. Subclasses say how one call is timed (`timed`) and how marks become milliseconds."""

    call: Call
    sets: Sequence[Sequence[Any]]
    rotation: int = 0  # which repeated set the next repeated call takes

    def timed(self, args: Sequence[Any]) -> tuple[Any, Any, Any]:
        raise NotImplementedError

    def synchronize(self) -> None:
        pass

    @staticmethod
    def elapsed(marks: tuple[Any, Any]) -> float:
        return (marks[1] - marks[0]) * 1e3

    def pair(self, fresh_args: Sequence[Any] | None) -> tuple[Any, Any, Any]:
        """One repeated call (the next rotating set), then, when given, one call on `fresh_args`;
        returns (the output to keep, the repeated marks, the fresh marks or None)."""
        k = self.rotation % len(self.sets)
        self.rotation += 1
        out, start, end = self.timed(self.sets[k])
        if fresh_args is None:
            return out, (start, end), None
        fresh_out, fstart, fend = self.timed(fresh_args)
        return fresh_out, (start, end), (fstart, fend)

    def back_to_back(self, inputs: Sequence[Sequence[Any]]) -> list[Any]:
        """One call per input set, back to back: no flush, no events, no work between the calls;
        the outputs are kept as returned (a solution that reuses its output memory shows it in
        every earlier output)."""
        outputs = [self.call(args) for args in inputs]
        self.synchronize()
        return outputs


class CpuTimer(Timer):
    """Wall clock around each call on the CPU."""

    def __init__(self, call: Call, sets: Sequence[Sequence[Any]]):
        self.call, self.sets = call, sets

    def warm(self) -> None:
        self.call(self.sets[0])

    def timed(self, args: Sequence[Any]) -> tuple[Any, Any, Any]:
        started = time.perf_counter()
        out = self.call(args)
        return out, started, time.perf_counter()
