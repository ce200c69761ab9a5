"""The timing region: the inputs and output slots of every timed call, in memory the timer owns.

The supervisor lays out `count` input sets and output slots in one region of bytes: on CPU a
part of the shared arena, on CUDA a device allocation of its own that it shares with the
solution process by CUDA IPC (`cuda_ipc`). Before each call it writes new inputs into the set
that call reads (chosen at random), drawn by the problem's own `get_inputs()` under a seed that
the solution process never learns (`fresh_inputs`). A slot receives the call's output only when
the call runs eagerly (on the CPU, or a forward CUDA graphs cannot capture); a captured call
leaves its output in the graph's own allocation, which the supervisor reads in place.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from ....catalog.specs import dtype_name
from ...protocol.channel import ALIGN, round_up, tensor_nbytes


class TimingUnavailable(Exception):
    """The problem itself cannot be timed this way (its inputs change shape between draws, say):
    the evaluation keeps its verdict and says why it was not timed."""


def set_bytes(template: Sequence[Any], out_nbytes: int) -> int:
    """Bytes one call takes in the region: its input tensors and its output slot, aligned."""
    tensors = [x for x in template if isinstance(x, torch.Tensor)]
    return sum(round_up(tensor_nbytes(x) + ALIGN) for x in tensors) + round_up(out_nbytes + ALIGN)


def fresh_inputs(module: Any, device: str, seed: int | None = None) -> list[Any]:
    """The problem's `get_inputs()` (under `seed`, or going on from the generators' state), its
    tensors made on `device` directly (factory calls follow the default device), so new inputs
    cost what generating them costs."""
    from ....catalog.materialize import seed_everything

    if seed is not None:
        seed_everything(seed)
    with torch.device(device):
        inputs = list(module.get_inputs())
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


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
        for _ in range(count):
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
