"""Device memory shared between the supervisor and a solution process through CUDA IPC.

The supervisor allocates the timing region (inputs and output slots of every timed call) on its
own device and exports it (`export`); the solution process maps it (`open_shared`). Both go
through the CUDA driver API with ctypes (`libcuda.so.1`, present wherever CUDA runs): torch's
own path (`UntypedStorage._share_cuda_`) cannot be opened inside the sandbox, while the raw
`cuIpcOpenMemHandle` can. A handle names the whole allocation, so `export` also says where the
tensor starts inside it.
"""

from __future__ import annotations

import ctypes
from typing import Any

import torch

HANDLE_BYTES = 64
LAZY_ENABLE_PEER_ACCESS = 1

_LIB: Any = None


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_byte * HANDLE_BYTES)]


def _driver() -> Any:
    global _LIB
    if _LIB is None:
        lib = ctypes.CDLL("libcuda.so.1")
        lib.cuMemGetAddressRange_v2.argtypes = [
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_size_t),
            ctypes.c_uint64,
        ]
        lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(_Handle), ctypes.c_uint64]
        open_fn = getattr(lib, "cuIpcOpenMemHandle_v2", None) or lib.cuIpcOpenMemHandle
        open_fn.argtypes = [ctypes.POINTER(ctypes.c_uint64), _Handle, ctypes.c_uint]
        lib.kbv3_open = open_fn
        lib.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
        _LIB = lib
    return _LIB


def _check(rc: int, what: str) -> None:
    if rc != 0:
        name = ctypes.c_char_p()
        try:
            _driver().cuGetErrorName(rc, ctypes.byref(name))
        except Exception:
            pass
        raise RuntimeError(f"{what} failed: CUDA driver error {rc} {(name.value or b'').decode()}")


def export(tensor: torch.Tensor) -> dict[str, Any]:
    """An IPC description of a contiguous CUDA tensor's memory: the allocation's handle (hex),
    the tensor's byte offset in it, and its size in bytes."""
    if not tensor.is_cuda or not tensor.is_contiguous():
        raise ValueError("only a contiguous CUDA tensor can be shared")
    torch.cuda.synchronize()
    lib = _driver()
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    _check(
        lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), tensor.data_ptr()), "cuMemGetAddressRange"
    )
    handle = _Handle()
    _check(lib.cuIpcGetMemHandle(ctypes.byref(handle), base.value), "cuIpcGetMemHandle")
    raw = ctypes.string_at(ctypes.addressof(handle), HANDLE_BYTES)
    return {
        "handle": raw.hex(),
        "offset": tensor.data_ptr() - base.value,
        "nbytes": tensor.numel() * tensor.element_size(),
    }


class _Interface:
    """The minimal `__cuda_array_interface__` torch needs to wrap a raw device pointer."""

    def __init__(self, pointer: int, nbytes: int):
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (pointer, False),
            "version": 3,
            "strides": None,
        }


def open_shared(description: dict[str, Any]) -> torch.Tensor:
    """Map memory another process exported (`export`) as a uint8 CUDA tensor of its size."""
    raw = bytes.fromhex(str(description["handle"]))
    if len(raw) != HANDLE_BYTES:
        raise ValueError("a CUDA IPC handle has 64 bytes")
    offset, nbytes = int(description["offset"]), int(description["nbytes"])
    torch.zeros(1, device="cuda")  # the primary context is current from here on
    lib = _driver()
    pointer = ctypes.c_uint64()
    handle = _Handle.from_buffer_copy(raw)
    _check(lib.kbv3_open(ctypes.byref(pointer), handle, LAZY_ENABLE_PEER_ACCESS), "cuIpcOpenMemHandle")
    return torch.as_tensor(_Interface(pointer.value + offset, nbytes), device="cuda")


def open_exported(description: dict[str, Any], shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Map memory an untrusted process exported, as a tensor of `shape` and `dtype`, after
    checking that the span it names lies inside the allocation it maps (a span past the end
    would let the process point the reader at memory that is not there). The mapping stays
    until the process that exported it is gone; one handle is mapped once per process."""
    numel = 1
    for size in shape:
        numel *= int(size)
    nbytes = numel * torch.empty((), dtype=dtype).element_size()
    raw = bytes.fromhex(str(description["handle"]))
    offset = int(description["offset"])
    if len(raw) != HANDLE_BYTES or offset < 0 or int(description["nbytes"]) != nbytes:
        raise ValueError(f"an output location must name {nbytes} bytes at a non-negative offset")
    base = _MAPPED.get(raw)
    if base is None:
        torch.zeros(1, device="cuda")
        lib = _driver()
        pointer = ctypes.c_uint64()
        _check(
            lib.kbv3_open(ctypes.byref(pointer), _Handle.from_buffer_copy(raw), LAZY_ENABLE_PEER_ACCESS),
            "cuIpcOpenMemHandle",
        )
        start, size = ctypes.c_uint64(), ctypes.c_size_t()
        _check(
            lib.cuMemGetAddressRange_v2(ctypes.byref(start), ctypes.byref(size), pointer.value), "cuMemGetAddressRange"
        )
        base = _MAPPED[raw] = (pointer.value, int(size.value))
    pointer, size = base
    if offset + nbytes > size:
        raise ValueError(f"an output location of {nbytes} bytes at {offset} overruns its allocation ({size} bytes)")
    flat = torch.as_tensor(_Interface(pointer + offset, nbytes), device="cuda")
    return flat.view(dtype).view(shape)


def close_exported() -> None:
    """Unmap every handle `open_exported` mapped (after the processes that exported them are gone)."""
    lib = _driver() if _MAPPED else None
    for pointer, _ in _MAPPED.values():
        lib.cuIpcCloseMemHandle(pointer)
    _MAPPED.clear()


_MAPPED: dict[bytes, tuple[int, int]] = {}  # handle -> (mapped base, allocation size)
