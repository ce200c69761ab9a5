"""Timing a callable the way the evaluator trusts: CUDA events on a busy GPU, or honest wall clock.

CUDA (`time_cuda`): after a time-based warm-up, the GPU is kept busy until its SM clock (read
from a spin kernel) stops rising, so an idle GPU's low clocks are not timed; the clock before
and after timing goes into the details, and a change of more than 10% is flagged (the candidate
child then times once more). Before every timed call the L2 cache is flushed by reading a buffer
of at least twice the device's L2 size, twice (`TimingPlan.l2_flush`, `l2_flush_passes`: a write
would leave dirty lines for the timed call to write back, and one read pass leaves some of the
lines written just before it), then a spin kernel keeps the GPU busy long enough for the host
to enqueue the start event, the call and the end event, so host launch gaps are not timed.
After warm-up, inputs rotate among several sets made outside the timed region, and the output
of every timed call is copied aside (after the end event) so the caller can re-check what was
timed. Repetitions grow in batches until the median's confidence interval is narrow
(`median_ci_rel`). A device-synchronized wall clock over a back-to-back loop cross-checks the
events: work that escapes the timed stream (side streams, CPU work) shows up as wall time far
above the event time, and is flagged. In an evaluation the solution process's figures are only
evidence: the supervisor bounds them with its own clock (`clock`).

CPU (`time_cpu`): `time.perf_counter` around each call, the same rotation and stability rule,
and the method recorded as "cpu_wall_clock".

Both accept `fresh` (a `fresh.FreshInputs`): then every call on a rotating (repeated) set is
followed by one on inputs never seen before, made outside the timed region. The reported stats
(median, stability) are those of the fresh calls; the repeated ones only feed the comparison in
`details["input_reuse"]` (a solution caching by input content is fast on repeats only) and the
flag "faster_on_repeated_inputs". The last fresh call is on `fresh.final`, its output kept.
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


def summarize(samples_ms: Sequence[float], method: str) -> TimingStats:
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
    # Writing left L2 full of dirty lines whose write-back the timed kernel paid for: +6-11% on an
    # H200 for softmax, GELU and a small GEMM (benchmarks/results/l2_flush_gpu.md).
    l2_flush: str = "read"
    # CUDA only: how many times the flush runs before each timed call. With 16 MB written just
    # before one 2x-L2 read, GELU and softmax timed up to 9% apart from process to process (each
    # process stuck in one state); a second read brought that to 0.8% and 0.3%, where one 4x-L2
    # read still spread 4-5% (benchmarks/results/placement_gpu.md).
    l2_flush_passes: int = 2

    def __post_init__(self) -> None:
        if self.l2_flush not in L2_FLUSH_MODES:
            raise ValueError(f"TimingPlan.l2_flush must be one of {L2_FLUSH_MODES}, got {self.l2_flush!r}")
        if not isinstance(self.l2_flush_passes, int) or self.l2_flush_passes < 1:
            raise ValueError(f"TimingPlan.l2_flush_passes must be an integer >= 1, got {self.l2_flush_passes!r}")


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
    stats = summarize(samples, "cpu_wall_clock")
    stats.details["note"] = "wall clock of the CPU process; under TRITON_INTERPRET=1 not a GPU-speed figure"
    if fresh is not None:
        _compare_reuse(stats, samples, repeated, ratio=CPU_REUSE_RATIO)
    return stats, last


# CPU wall clock on a shared machine (CI, 2 cores) is noisy enough that an honest interpreted
# kernel was once timed 2x slower on fresh inputs; a content cache is faster by orders of
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


def l2_flush_bytes(device: torch.device | int | None = None) -> int:
    """Twice the device's L2 (at least 64 MiB when the driver does not report it)."""
    props = torch.cuda.get_device_properties(device if device is not None else torch.cuda.current_device())
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    return max(2 * l2, 64 << 20)


def _sleep_cycles_per_ms() -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    cycles = 2_000_000
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize()
    return cycles / max(start.elapsed_time(end), 1e-3)


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


def _keep_calling(call: Call, sets: Sequence[Sequence[Any]], seconds: float, min_calls: int = 0) -> None:
    """Call over the rotating sets for `seconds` (and at least `min_calls` times), synchronizing
    every 10 calls so the host does not run far ahead of the GPU."""
    started, i = time.perf_counter(), 0
    while i < min_calls or (time.perf_counter() - started < seconds and i < 100_000):
        call(sets[i % len(sets)])
        i += 1
        if i % 10 == 0:
            torch.cuda.synchronize()


def host_enqueue_ms(call: Call, args: Sequence[Any], reps: int = 5) -> float:
    """How long the host takes to enqueue one call (the GPU must stay busy at least this long)."""
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        call(args)
        times.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    return statistics.median(times)


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


class CudaTimer(Timer):
    """The timed call of the evaluator on CUDA, as a reusable object: `warm` once, then `timed`
    calls. Before every timed call the L2 cache is flushed (`plan.l2_flush_passes` reads of a
    buffer twice the L2) and a spin kernel keeps the GPU busy while the host enqueues the start
    event, the call and the end event. The local driver `time_cuda` and the solution process's
    supervisor-driven batches both time through this, so both measure the same way."""

    def __init__(self, call: Call, sets: Sequence[Sequence[Any]], plan: TimingPlan):
        self.call, self.sets, self.plan = call, sets, plan
        self.flush = torch.zeros(l2_flush_bytes() // 4, dtype=torch.float32, device="cuda")
        self.flush_sum = torch.zeros((), dtype=torch.float32, device="cuda")
        self.cycles_per_ms = 0.0
        self.enqueue_ms = 0.0
        self.sleep_cycles = 0

    def flush_l2(self) -> None:
        # Reading leaves L2 full of clean lines (the previous call's dirty output is written
        # back here, untimed); writing would leave dirty ones for the timed call to write back.
        for _ in range(self.plan.l2_flush_passes):
            if self.plan.l2_flush != "read":
                self.flush.zero_()
            if self.plan.l2_flush != "write":
                torch.sum(self.flush, dim=0, out=self.flush_sum)

    def warm(self) -> None:
        """Warm up for a while (an idle GPU needs time to reach its clocks), wait for the SM clock
        to settle, and size the spin kernel from the host's enqueue time of one call."""
        _keep_calling(self.call, self.sets, self.plan.warmup_seconds, min_calls=self.plan.warmup)
        # _sleep spins for SM clock cycles, so its cycles per ms is the SM clock in kHz.
        self.cycles_per_ms = settle_clock(
            _sleep_cycles_per_ms, lambda: _keep_calling(self.call, self.sets, 0.05), self.plan.clock_settle_seconds
        )
        self.enqueue_ms = host_enqueue_ms(self.call, self.sets[0])
        self.sleep_cycles = int(self.busy_ms * self.cycles_per_ms)

    @property
    def busy_ms(self) -> float:
        return 2.0 * self.enqueue_ms + 0.05

    def timed(self, args: Sequence[Any]) -> tuple[Any, Any, Any]:
        self.flush_l2()
        torch.cuda._sleep(self.sleep_cycles)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        result = self.call(args)
        end.record()
        return result, start, end

    def synchronize(self) -> None:
        torch.cuda.synchronize()

    @staticmethod
    def elapsed(marks: tuple[Any, Any]) -> float:
        return marks[0].elapsed_time(marks[1])

    def clock_mhz(self) -> float:
        return _sleep_cycles_per_ms() / 1e3


def time_cuda(
    call: Call, sets: Sequence[Sequence[Any]], plan: TimingPlan = TimingPlan(), fresh: Any = None
) -> tuple[TimingStats, list[Any]]:
    """CUDA-event timing of `call(inputs)` rotating over `sets`, until the median is known well
    enough; returns the stats and a copy of the last timed output of each set."""
    perf, sync = time.perf_counter, torch.cuda.synchronize
    timer = CudaTimer(call, sets, plan)
    timer.warm()
    cycles_per_ms = timer.cycles_per_ms
    last: list[Any] = [None] * len(sets)
    samples: list[float] = []
    repeated: list[float] = []
    started = perf()
    i = 0
    while True:
        pairs, fresh_pairs = [], []
        for _ in range(plan.batch):
            k = timer.rotation % len(sets)
            # The fresh inputs are written (a blend with temporaries: about 4x the inputs' bytes)
            # before the rotating call, and its output copied after the fresh call, so a reported
            # (fresh) call follows only the previous call's own output (see docs/timing.md).
            fresh_args = fresh.next() if fresh is not None else None
            out, rep, fr = timer.pair(fresh_args)
            pairs.append(rep)
            if fr is not None:
                fresh_pairs.append(fr)
            last[k] = _clone_output(out)
            i += 1
        sync()
        if fresh is None:
            samples.extend(s.elapsed_time(e) for s, e in pairs)
        else:
            repeated.extend(s.elapsed_time(e) for s, e in pairs)
            samples.extend(s.elapsed_time(e) for s, e in fresh_pairs)
        elapsed = perf() - started
        stable = (
            len(samples) >= plan.min_reps and elapsed >= plan.min_seconds and median_ci_rel(samples) <= plan.stable_rel
        )
        if i >= len(sets) and (stable or len(samples) >= plan.max_reps or elapsed > plan.max_seconds):
            break
    if fresh is not None:
        out, start, end = timer.timed(fresh.final)
        fresh.final_output = _clone_output(out)
        sync()
        samples.append(start.elapsed_time(end))
    stats = summarize(samples, "cuda_events")
    if fresh is not None:
        _compare_reuse(stats, samples, repeated)
        stats.details["fresh_buffers"] = len(fresh.buffers)
    stats.details.update(
        l2_flush_bytes=timer.flush.numel() * 4,
        l2_flush=plan.l2_flush,
        l2_flush_passes=plan.l2_flush_passes,
        busy_wait_ms=round(timer.busy_ms, 4),
        host_enqueue_ms=round(timer.enqueue_ms, 4),
        stable=stable,
        sets=len(sets),
        median_ci_rel=round(median_ci_rel(samples), 5),
    )
    if plan.wall_reps:
        sync()
        t0 = perf()
        for j in range(plan.wall_reps):
            call(sets[j % len(sets)])
        sync()
        stats.wall_ms = (perf() - t0) * 1e3 / plan.wall_reps
        # Back-to-back calls overlap host launches with GPU work, so the wall clock per call
        # exceeds the event time only by launch overhead; far above it, work ran outside the
        # timed stream (another stream, the CPU) and the event figure is not the whole cost.
        if stats.wall_ms > 1.5 * stats.median_ms + max(timer.enqueue_ms, 0.02):
            stats.flags.append(ESCAPED_STREAM)
    cycles_per_ms_after = _sleep_cycles_per_ms()
    stats.details.update(
        sm_clock_mhz_before=round(cycles_per_ms / 1e3, 1), sm_clock_mhz_after=round(cycles_per_ms_after / 1e3, 1)
    )
    if abs(cycles_per_ms_after - cycles_per_ms) > CLOCK_CHANGE_REL * cycles_per_ms:
        stats.flags.append(CLOCK_CHANGED)
    if not stable:
        stats.flags.append("median_not_stable")
    return stats, last
