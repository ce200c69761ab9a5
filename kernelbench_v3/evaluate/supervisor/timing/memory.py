"""The timing region: the inputs and output slots of every timed call, in memory the timer owns.

The supervisor lays out `count` input sets and output slots in one region of bytes: on CPU a
part of the shared arena, on CUDA a device allocation of its own that it shares with the
solution process by CUDA IPC (`cuda_ipc`). Before each call it writes new inputs into the set
that call reads (chosen at random), drawn by the problem's own `get_inputs()` under a seed that
the solution process never learns (`fresh_inputs`). A slot receives the call's output only when
the call runs eagerly (on the CPU, or a forward CUDA graphs cannot capture); a captured call
leaves its output in the graph's own allocation, which the supervisor reads in place.

`solution_memory` lays out a solution's region (`cpu_region_bytes`: its size in the arena);
the baseline child lays out its own over buffers of its own (`local.time_reference`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ....catalog.specs import dtype_name
from ...protocol import cuda_ipc
from ...protocol.channel import ALIGN, round_up, tensor_nbytes
from .errors import TimingUnavailable

CPU_TIMED_SETS = 2  # input sets and output slots of the CPU timing region (in the arena)
CUDA_TIMED_SETS = 4  # input sets (each with its CUDA graph) of the CUDA timing region
CUDA_TIMING_BYTES = 12 << 30  # the CUDA timing region, at most (and at most this share of the device:)
CUDA_TIMING_SHARE = 0.1
CUDA_ALLOCATION_ROUND = 2 << 20  # torch's caching allocator rounds large blocks to this


def set_bytes(template: Sequence[Any], out_nbytes: int) -> int:
    """Bytes one call takes in the region: its input tensors and its output slot, aligned."""
    tensors = [x for x in template if isinstance(x, torch.Tensor)]
    return sum(round_up(tensor_nbytes(x) + ALIGN) for x in tensors) + round_up(out_nbytes + ALIGN)


def fresh_inputs(module: Any, device: str, seed: int | None = None) -> list[Any]:
    """The problem's `get_inputs()` (under `seed`, or going on from the generators' state), its
    tensors made on `device` directly (`materialize.draw_inputs`)."""
    from ....catalog.materialize import draw_inputs

    return draw_inputs(module, device, seed)


class TimedMemory:
    def __init__(
        self,
        region: torch.Tensor,
        template: Sequence[Any],
        out_shape: Sequence[int],
        out_dtype: torch.dtype,
        count: int,
    ):
        if region.dtype != torch.uint8 or region.dim() != 1:
            raise ValueError("the timing region is a flat uint8 tensor")
        self.region, self.count = region, count
        self.template = list(template)
        self.out_shape, self.out_dtype = tuple(out_shape), out_dtype
        out_nbytes = math.prod(self.out_shape) * torch.empty((), dtype=out_dtype).element_size()
        self.out_nbytes = out_nbytes
        offset = 0
        self.set_layout: list[list[dict[str, Any]]] = []
        self.slot_layout: list[dict[str, Any]] = []
        self.set_starts: list[int] = []  # where each set's bytes begin (its inputs, then its slot)
        for _ in range(count):
            self.set_starts.append(offset)
            args = []
            for x in self.template:
                if isinstance(x, torch.Tensor):
                    args.append({"tensor": {"offset": offset, "shape": list(x.shape), "dtype": dtype_name(x.dtype)}})
                    offset = round_up(offset + tensor_nbytes(x) + ALIGN)
                else:
                    args.append({"value": x})
            self.set_layout.append(args)
            self.slot_layout.append({"offset": offset, "shape": list(self.out_shape), "dtype": dtype_name(out_dtype)})
            offset = round_up(offset + out_nbytes + ALIGN)
        if offset > region.numel():
            raise ValueError(f"the timing region holds {region.numel()} bytes, the layout needs {offset}")
        from ...timed_calls import resolve, view

        self.sets = [resolve(region, args) for args in self.set_layout]
        self.slots = [view(region, ref) for ref in self.slot_layout]

    def input_span(self, i: int) -> tuple[int, int]:
        """(offset, bytes) of set `i`'s inputs in the region: one contiguous range, laid out
        alike in every set and every `TimedMemory` of the same template (the occupancy gate
        copies a whole set's inputs at once, `held`)."""
        start = self.set_starts[i]
        return start, int(self.slot_layout[i]["offset"]) - start

    def layout(self) -> dict[str, Any]:
        return {"sets": self.set_layout, "slots": self.slot_layout}

    def fill(self, inputs: Sequence[Any]) -> None:
        """Valid inputs in every set before anything reads them: the capture's warm-up calls run
        on the sets before the first timed call writes its own, and an honest forward that
        indexes by an integer input (cross entropy's targets, a gather) would read out of bounds
        on uninitialised bytes (on the H200 it faulted, and under MPS a fault reaches every
        client of the server)."""
        for i in range(self.count):
            self.write(i, inputs)

    def write(self, i: int, inputs: Sequence[Any]) -> None:
        """New inputs into set `i` (same shapes and dtypes as the template)."""
        for j, (dst, src) in enumerate(zip(self.sets[i], inputs)):
            if isinstance(dst, torch.Tensor):
                if not isinstance(src, torch.Tensor) or src.shape != dst.shape or src.dtype != dst.dtype:
                    raise TimingUnavailable(f"get_inputs() input {j} changed shape or dtype between draws")
                dst.copy_(src)


def cpu_region_bytes(template: Sequence[Any], expected: torch.Tensor) -> int:
    """Bytes of the CPU timing region (inside the solution's arena)."""
    return CPU_TIMED_SETS * set_bytes(template, tensor_nbytes(expected))


def solution_memory(
    device: str,
    template: Sequence[Any],
    expected: torch.Tensor,
    arena_view: Callable[[int, int], torch.Tensor],
    cpu_region: tuple[int, int],
) -> tuple[TimedMemory, dict[str, Any]]:
    """A solution's timing region, filled, and how the solution process finds it: on CUDA a
    device allocation of its own exported by CUDA IPC, on the CPU `cpu_region` of its arena."""
    per_set = set_bytes(template, tensor_nbytes(expected))
    if device == "cuda":
        free, total = torch.cuda.mem_get_info()
        budget = min(CUDA_TIMING_BYTES, int(CUDA_TIMING_SHARE * total), free // 4)
        count = int(max(1, min(CUDA_TIMED_SETS, budget // per_set)))
        # A whole number of the allocator's 2 MiB pages: the IPC handle exports the whole
        # allocation, so no other tensor of the supervisor's may ever share it.
        nbytes = -(-count * per_set // CUDA_ALLOCATION_ROUND) * CUDA_ALLOCATION_ROUND
        region = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        description = {"cuda_ipc": cuda_ipc.export(region)}
    else:
        offset, nbytes = cpu_region
        count = CPU_TIMED_SETS
        region = arena_view(offset, nbytes)
        description = {"arena": [offset, nbytes]}
    memory = TimedMemory(region, template, expected.shape, expected.dtype, count)
    memory.fill(template)  # never garbage under the capture's warm-up calls
    return memory, description
