"""The timer's own device work around each timed call: the L2 flush and the echo kernel's
duration. Used by both entries, `time_solution` and `time_reference` (through `rig.Rig`).

- **Flush**: every timed call starts with a cold L2. After writing a call's inputs the timer reads
  a buffer of twice the L2's size with its own kernel, then writes as many bytes as one call's
  output (at most the L2's size): the L2 then holds what it holds between calls run back to
  back, the previous output's dirty lines and none of the inputs. (A write flush of the whole
  buffer, as `triton.testing.do_bench` does, would charge a small-output call for writing back
  a full L2; a read flush alone would charge a large-output call for none, docs/timing.md.) A flush can also be
  timed, from the call until the device has run it: a flush right after a solution's call that
  takes longer than one right after the echo's means the solution's work was still running
  (`witness.gap`). That is the host's clock, which also counts any delay of the timer's own
  thread; the flush's own seconds by events on the timer's stream (`flush_gpu_s`) are kept
  beside it for the record, to tell the two apart (the check does not use them).
- **Echo call**: the echo's call is one replay of a graph of one tiny kernel; subtracting the
  echo's window removes the gate, the context switch and the graph's launch processing on the
  GPU, and that call, which stands for the fixed cost of a launch (`measure`). Its duration by
  events around one replay behind a flush (`echo_call_s`) and the kernel's back to back in a
  graph (`echo_kernel_s`) are kept for the record: under MPS the first read 3.5-28 us between
  evaluations on the H200, which is why it is no longer added back.
- **Idle flush**: `calibrate_idle` times a flush once per process before any solution process
  exists; a device that is busy with someone's kernels later shows against it (`checks.busy`).

No work of the timer's own runs inside a timed window: on a time-sliced GPU every switch between
two processes' contexts costs about 0.2 ms. On the CPU there is no L2 to clear for a machinery
test and nothing is queued: every method is a no-op and the echo kernel costs 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

FLUSH_FACTOR = 2  # read this many times the L2's size
DEFAULT_L2_BYTES = 50 << 20
ECHO_KERNELS = 64  # tiny kernels in the graph that times one
ECHO_CALLS = 21  # single replays of the echo's graph, each behind a flush: their median
IDLE_FLUSHES = 21
_IDLE_FLUSH_S: dict[int, float] = {}  # per device index: a flush's seconds on the idle device


def calibrate_idle(device: str) -> float:
    """A timed flush's seconds on the device as it is now (the median of a few), once per process:
    call it before any solution process exists."""
    if device != "cuda":
        return 0.0
    index = torch.cuda.current_device()
    if index not in _IDLE_FLUSH_S:
        work = DeviceWork(device)
        work.timed_flush()
        _IDLE_FLUSH_S[index] = sorted(work.timed_flush() for _ in range(IDLE_FLUSHES))[IDLE_FLUSHES // 2]
    return _IDLE_FLUSH_S[index]


class DeviceWork:
    def __init__(self, device: str, dirty_bytes: int = 0):
        self.device = device
        self.cuda = device == "cuda"
        self.echo_kernel_s = self.echo_call_s = self.idle_flush_s = 0.0
        self.flush_gpu_s: float | None = None  # the last timed flush, by events (CUDA only)
        self.l2_bytes = DEFAULT_L2_BYTES
        if not self.cuda:
            return
        l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or DEFAULT_L2_BYTES)
        self.l2_bytes = l2
        self._flush = torch.ones(FLUSH_FACTOR * l2 // 4, dtype=torch.int32, device="cuda")
        # The steady state of calls back to back: the previous call's output (at most a full
        # L2 of it) still dirty in the L2, so each call pays to write back what one call writes.
        self._dirty = torch.empty(max(1, min(int(dirty_bytes), l2) // 4), dtype=torch.int32, device="cuda")
        self._sink = torch.empty((), dtype=torch.int32, device="cuda")
        self._tiny = torch.zeros(1, device="cuda")
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)
        self._flush_start = torch.cuda.Event(enable_timing=True)
        self._flush_end = torch.cuda.Event(enable_timing=True)
        self.echo_kernel_s, self.echo_call_s = self._time_echo()
        self.idle_flush_s = _IDLE_FLUSH_S.get(torch.cuda.current_device(), 0.0)

    def flush_ranges(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """((address, bytes) read, (address, bytes) written) by a flush: the occupancy gate's
        HOLD does the same flush with its own threads (`held`)."""
        return (
            (self._flush.data_ptr(), self._flush.numel() * 4),
            (self._dirty.data_ptr(), self._dirty.numel() * 4),
        )

    def flush(self) -> None:
        """Clear the L2 by reading a buffer twice its size, then leave one call's output worth
        of dirty lines in it (queued, not waited for)."""
        if self.cuda:
            torch.amax(self._flush, dim=0, out=self._sink)
            self._dirty.fill_(7)

    def timed_flush(self, clock: Callable[[], float] = time.perf_counter) -> float:
        """A flush, waited for: seconds by `clock` from the call until the device has run it.
        On a time-sliced GPU that includes switching back to this process's context and any
        work another process still had running, which is what the gap check looks for."""
        if not self.cuda:
            return 0.0
        started = clock()
        self._flush_start.record()
        self.flush()
        self._flush_end.record()
        torch.cuda.current_stream().synchronize()
        took = clock() - started
        self.flush_gpu_s = self._flush_start.elapsed_time(self._flush_end) * 1e-3
        return took

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.current_stream().synchronize()

    def _time_echo(self) -> tuple[float, float]:
        """(one tiny kernel's duration, from a graph of ECHO_KERNELS of them; one replay of the
        echo's one-kernel graph by events around it, behind a flush: the median of ECHO_CALLS)."""
        tiny = torch.zeros(1, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.add(tiny, 1)
        torch.cuda.current_stream().wait_stream(side)
        many, one = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(many):
            for _ in range(ECHO_KERNELS):
                torch.add(tiny, 1)
        with torch.cuda.graph(one):
            tiny.add_(1)
        many.replay()
        one.replay()
        self.echo_graph, self._echo_tiny = one, tiny  # the echo's call, for a timer that runs its echo in-process
        kernel = float("inf")
        for _ in range(5):
            self._start.record()
            many.replay()
            self._end.record()
            self._end.synchronize()
            kernel = min(kernel, self._start.elapsed_time(self._end) * 1e-3 / ECHO_KERNELS)
        calls = []
        for _ in range(ECHO_CALLS):
            self.flush()
            self._start.record()
            one.replay()
            self._end.record()
            self._end.synchronize()
            calls.append(self._start.elapsed_time(self._end) * 1e-3)
        return kernel, sorted(calls)[ECHO_CALLS // 2]
