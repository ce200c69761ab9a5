"""Running a window of calls: each call's inputs from its own set, its output copied into its own
slot, all of it in memory the timer owns.

Used on both sides of the timing protocol, so that a solution and the baseline are timed by the
same loop: the solution process (`worker`) runs it over the supervisor's shared timing region,
and the baseline child runs it over its own buffers. On CUDA the calls are captured in CUDA
graphs of `unit` calls each (as `triton.testing.do_bench_cudagraph` does), so a window of k calls
is k / unit graph launches and host launch overhead is not part of a call's time; a forward that
cannot be captured (it synchronizes, say) runs eagerly and the record says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from .cases import single_output

GRAPH_WARM_CALLS = 3


class TimedOutputError(Exception):
    """A timed call returned something that does not fit its slot."""


def view(region: torch.Tensor, ref: dict[str, Any]) -> torch.Tensor:
    """The tensor a layout entry ({offset, shape, dtype}) names inside a uint8 region."""
    from .protocol.channel import DTYPES

    dtype = DTYPES[ref["dtype"]]
    shape = tuple(int(s) for s in ref["shape"])
    numel = 1
    for s in shape:
        numel *= s
    nbytes = numel * torch.empty((), dtype=dtype).element_size()
    offset = int(ref["offset"])
    if offset < 0 or offset + nbytes > region.numel():
        raise ValueError(f"a timing slot at {offset} (+{nbytes} bytes) lies outside the region")
    return region[offset : offset + nbytes].view(dtype).view(shape)


def resolve(region: torch.Tensor, args: Sequence[dict[str, Any]]) -> list[Any]:
    return [view(region, a["tensor"]) if "tensor" in a else a["value"] for a in args]


class WindowCalls:
    def __init__(self, fn: Callable[..., Any], sets: Sequence[Sequence[Any]], slots: Sequence[torch.Tensor]):
        self.fn, self.sets, self.slots = fn, sets, slots
        self.unit = 1
        self.graphs: list[Any] = []
        self.single: Any = None
        self.graph_error = ""

    def call(self, i: int) -> None:
        out = single_output(self.fn(*self.sets[i]))
        slot = self.slots[i]
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(slot.shape) or out.dtype != slot.dtype:
            what = f"{tuple(out.shape)} {out.dtype}" if isinstance(out, torch.Tensor) else type(out).__name__
            raise TimedOutputError(f"a timed call returned {what}, expected {tuple(slot.shape)} {slot.dtype}")
        slot.copy_(out)

    def capture(self, calls: int, unit: int) -> bool:
        """Capture `calls // unit` graphs of `unit` calls each (sets 0..calls-1) and a graph of
        call 0 alone; False (and `graph_error`) when the forward cannot be captured."""
        self.unit = unit
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for i in range(min(GRAPH_WARM_CALLS, calls)):
                    self.call(i)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            graphs = []
            for u in range(calls // unit):
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    for i in range(u * unit, (u + 1) * unit):
                        self.call(i)
                graphs.append(graph)
            single = torch.cuda.CUDAGraph()
            with torch.cuda.graph(single):
                self.call(0)
            torch.cuda.synchronize()
        except TimedOutputError:
            raise
        except Exception as exc:  # not capturable: windows run eagerly
            self.graph_error = f"{type(exc).__name__}: {exc}"[:300]
            self.graphs, self.single, self.unit = [], None, 1
            torch.cuda.synchronize()
            return False
        self.graphs, self.single = graphs, single
        return True

    def run(self, k: int) -> None:
        """Calls 0..k-1 (k a multiple of the unit, or 1)."""
        if not self.graphs:
            for i in range(k):
                self.call(i)
        elif k == 1:
            self.single.replay()
        else:
            for u in range(k // self.unit):
                self.graphs[u].replay()
