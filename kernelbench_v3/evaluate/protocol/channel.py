"""The data-only channel between the supervisor and a solution process.

Two parts, both plain data:

- `Link` (from `frames`, which needs no torch): length-prefixed JSON messages over a Unix socket.
  The supervisor never unpickles anything the solution process sent; JSON parsing runs no code.
  Frames are bounded in size, and every receive has a deadline measured by the receiver's own clock.
- `Arena`: one shared-memory file (memfd) mapped by both processes. Tensors travel as raw bytes
  at an offset, described by a `TensorRef` (offset, shape, dtype) that the reader validates
  against the arena's bounds and a fixed list of dtypes before it makes a view.

The supervisor treats every byte the solution process can write as untrusted: it copies an
output slot out of the arena as soon as the reply that names it arrives, and it never reads its
own inputs back from the arena (it keeps private copies).
"""

from __future__ import annotations

import math
import mmap
import os
from dataclasses import dataclass
from typing import Any

import torch

from ...catalog.specs import dtype_name
from .frames import MAX_FRAME_BYTES, Deadline, Link, PeerGone, ProtocolError

__all__ = [
    "ALIGN",
    "DTYPES",
    "MAX_FRAME_BYTES",
    "Arena",
    "Deadline",
    "Layout",
    "Link",
    "PeerGone",
    "ProtocolError",
    "TensorRef",
]

ALIGN = 128

# The dtypes a tensor may declare on the channel; anything else is refused.
DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, name)
    for name in (
        "float64",
        "float32",
        "float16",
        "bfloat16",
        "int64",
        "int32",
        "int16",
        "int8",
        "uint8",
        "bool",
        "float8_e4m3fn",
        "float8_e5m2",
        "complex64",
    )
    if hasattr(torch, name)
}


@dataclass(frozen=True)
class TensorRef:
    """Where a tensor lies in the arena: `nbytes` at `offset`, viewed as `shape` of `dtype`."""

    offset: int
    shape: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * torch.empty((), dtype=DTYPES[self.dtype]).element_size()

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "shape": list(self.shape), "dtype": self.dtype}

    @classmethod
    def from_json(cls, data: Any) -> TensorRef:
        if not isinstance(data, dict) or set(data) != {"offset", "shape", "dtype"}:
            raise ProtocolError(f"a tensor reference must have offset, shape and dtype, got {data!r:.200}")
        offset, shape, dtype = data["offset"], data["shape"], data["dtype"]
        if not _is_int(offset) or offset < 0 or offset % ALIGN:
            raise ProtocolError(f"tensor offset {offset!r} is not an aligned non-negative integer")
        if not isinstance(shape, list) or len(shape) > 8 or not all(_is_int(s) and 0 <= s < 1 << 40 for s in shape):
            raise ProtocolError(f"tensor shape {shape!r:.200} is not a list of at most 8 sizes")
        if dtype not in DTYPES:
            raise ProtocolError(f"tensor dtype {dtype!r:.50} is not one of {sorted(DTYPES)}")
        return cls(offset, tuple(shape), dtype)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Arena:
    """A shared-memory file both processes map; `put` writes a tensor, `view` reads one in place."""

    def __init__(self, fd: int, size: int):
        self.fd, self.size = fd, size
        self._map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self._bytes = torch.frombuffer(self._map, dtype=torch.uint8) if size else torch.empty(0, dtype=torch.uint8)

    @classmethod
    def create(cls, size: int) -> Arena:
        size = max(ALIGN, round_up(size))
        fd = os.memfd_create("kbv3-arena", os.MFD_CLOEXEC)
        os.ftruncate(fd, size)
        return cls(fd, size)

    def view(self, ref: TensorRef) -> torch.Tensor:
        """The tensor `ref` names, as a view of the arena (bounds checked)."""
        nbytes = ref.nbytes
        if ref.offset + nbytes > self.size:
            raise ProtocolError(
                f"tensor of {nbytes} bytes at offset {ref.offset} overruns the arena ({self.size} bytes)"
            )
        raw = self._bytes[ref.offset : ref.offset + nbytes]
        return (
            raw.view(DTYPES[ref.dtype]).view(ref.shape) if nbytes else torch.empty(ref.shape, dtype=DTYPES[ref.dtype])
        )

    def put(self, offset: int, tensor: torch.Tensor) -> TensorRef:
        """Copy `tensor` (any device) into the arena at `offset`."""
        ref = TensorRef(offset, tuple(tensor.shape), dtype_name(tensor.dtype))
        if ref.dtype not in DTYPES:
            raise ProtocolError(f"dtype {ref.dtype} cannot travel on the channel")
        self.view(ref).copy_(tensor.detach().reshape(ref.shape))
        return ref

    def close(self) -> None:
        self._bytes = torch.empty(0, dtype=torch.uint8)
        try:
            self._map.close()
        except BufferError:  # a view is still alive somewhere; the mapping goes with the process
            pass
        try:
            os.close(self.fd)
        except OSError:
            pass


def round_up(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


class Layout:
    """A bump allocator over arena offsets (aligned)."""

    def __init__(self, start: int = 0):
        self.end = round_up(start)

    def take(self, nbytes: int) -> int:
        offset = self.end
        self.end = round_up(offset + max(nbytes, 1))
        return offset


def tensor_nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()
