"""The CUDA timer: CUDA events on a busy GPU with a flushed L2, and the local timing loop.

`CudaTimer` owns how one call is timed on CUDA; the solution process's supervisor-driven batches
(`worker`) and the local driver `time_cuda` (the baseline's reference timing) both time through
it, so both measure the same way. Before every timed call:

- the L2 cache is flushed by reading a buffer of at least twice the device's L2, twice
  (`TimingPlan.l2_flush`, `l2_flush_passes`). A read leaves clean lines; a write would leave
  dirty ones for the timed call to write back, and one read pass leaves part of what was written
  just before it (docs/timing.md, "L2 flush");
- a spin kernel (`torch.cuda._sleep`) keeps the GPU busy long enough for the host to enqueue the
  start event, the call and the end event, so host launch gaps are not timed.

`warm` warms up for a while and then keeps the GPU busy until its SM clock, read from the spin
kernel, stops rising: an idle GPU's low clocks would be timed otherwise (docs/timing.md, "Clock
settling").

`time_cuda` adds what the local driver needs on top: repetitions in batches until the median's
confidence interval is narrow (`timing.median_ci_rel`), the output of every timed call copied
aside after its end event, the fresh-input pairing (`fresh.FreshInputs`, `timing.Timer.pair`), a
device-synchronized wall clock over a back-to-back loop that flags work escaping the timed stream
(`timing.ESCAPED_STREAM`; docs/timing.md, "Side streams"), and the SM clock before and after,
flagged when it moved (`timing.CLOCK_CHANGED`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

import torch

from .timing import (
    CLOCK_CHANGE_REL,
    CLOCK_CHANGED,
    CUDA_PLAN,
    ESCAPED_STREAM,
    Call,
    Timer,
    TimingPlan,
    TimingStats,
    _clone_output,
    _compare_reuse,
    median_ci_rel,
    settle_clock,
    timing_stats,
)


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
    call: Call, sets: Sequence[Sequence[Any]], plan: TimingPlan = CUDA_PLAN, fresh: Any = None
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
    stats = timing_stats(samples, "cuda_events")
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
