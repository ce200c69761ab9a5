"""One timed call: its inputs read from an input set in memory the timer owns, its output left
where the call put it.

Used on both sides of the timing protocol, so that a solution and the baseline run their calls
the same way: the solution process (`worker`) over the supervisor's shared timing region, the
baseline child over its own buffers. On CUDA each input set gets a CUDA graph of one call
(captured once, as `triton.testing.do_bench_cudagraph` does), so a call is one graph launch and
the host's launch overhead is not part of its time; the graph's output is a fixed allocation the
supervisor reads in place (CUDA IPC), so no copy sits inside the timed call. A forward that
cannot be captured (it synchronises, say), and every call on the CPU, runs eagerly and copies
its output into the set's output slot, inside the call: the record says so (`timing_method`).
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


def checked_output(out: Any, slot: torch.Tensor) -> torch.Tensor:
    """The call's single tensor output, or TimedOutputError when it does not fit `slot`."""
    out = single_output(out)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(slot.shape) or out.dtype != slot.dtype:
        what = f"{tuple(out.shape)} {out.dtype}" if isinstance(out, torch.Tensor) else type(out).__name__
        raise TimedOutputError(f"a timed call returned {what}, expected {tuple(slot.shape)} {slot.dtype}")
    return out


class TimedCalls:
    """The calls over `sets` (argument lists) with one output slot per set."""

    def __init__(
        self,
        fn: Callable[..., Any],
        sets: Sequence[Sequence[Any]],
        slots: Sequence[torch.Tensor],
        copy_eager: bool = True,
    ):
        # copy_eager: an eager call copies its output into its slot, where the supervisor reads
        # it; the trusted baseline reads nothing and keeps no copy in its calls.
        self.fn, self.sets, self.slots, self.copy_eager = fn, sets, slots, copy_eager
        self.graphs: list[Any] = []
        self.outputs: list[torch.Tensor] = []  # each graph's output, where its replays leave it
        self.graph_error = ""

    def call(self, s: int) -> torch.Tensor:
        """One eager call on set `s`, its output copied into slot `s`."""
        out = checked_output(self.fn(*self.sets[s]), self.slots[s])
        if not self.copy_eager:
            return out
        self.slots[s].copy_(out)
        return self.slots[s]

    def capture(self, keep_graphs: bool = False) -> bool:
        """Capture one CUDA graph per set; False (and `graph_error`) when the forward cannot be
        captured, and then every call runs eagerly."""
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for i in range(GRAPH_WARM_CALLS):
                    checked_output(self.fn(*self.sets[i % len(self.sets)]), self.slots[0])
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            graphs, outputs = [], []
            for s in range(len(self.sets)):
                # keep_graphs: its cudaGraph_t outlives the capture (`raw_cuda_graph`), for the
                # gate to put it behind a node of its own (`protocol.gate.Driver.gated_graph`).
                graph = torch.cuda.CUDAGraph(keep_graph=keep_graphs)
                with torch.cuda.graph(graph):
                    out = checked_output(self.fn(*self.sets[s]), self.slots[s])
                if keep_graphs:
                    graph.instantiate()  # a kept graph instantiates here, not in its first (timed) replay
                graphs.append(graph)
                outputs.append(out)
            torch.cuda.synchronize()
        except TimedOutputError:
            raise
        except Exception as exc:  # not capturable: calls run eagerly
            self.graph_error = f"{type(exc).__name__}: {exc}"[:300]
            self.graphs, self.outputs = [], []
            torch.cuda.synchronize()
            return False
        self.graphs, self.outputs = graphs, outputs
        return True

    def run(self, s: int) -> torch.Tensor:
        """Call on set `s`; returns where its output now lies."""
        if self.graphs:
            self.graphs[s].replay()
            return self.outputs[s]
        return self.call(s)
