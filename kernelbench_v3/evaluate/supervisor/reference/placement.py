"""Where an evaluation's large tensors live: the reference's saved tensors on the GPU within a
budget (`SavedPlace`), host copies of GPU-sized tensors in page-locked memory within a budget
(`HostCopies`), and the GPU memory the allocator keeps unused given back to the driver before a
GPU turn ends, the reference's and the timing's, for the process that allocates next
(`release_cached`).

Why: on the H100 host a copy between the GPU and pageable memory ran at about 1.4-1.8 GB/s
(`benchmarks/results/reference_steps_gpu.md`): a 268 MB problem's ten case inputs took 1.9 s to
reach the CPU and its ten outputs 1.5 s to reach the GPU for the comparison. Page-locked memory
moves at the link's speed. Both kinds of memory are scarce, so each has a byte budget and what
exceeds it takes the old path; a CPU evaluation keeps everything as it was.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import torch

from ...protocol.channel import tensor_nbytes

# The share of the GPU's memory that a reference's saved tensors (expected outputs, float64
# residuals) may take there; beyond it they are kept on the CPU. On the GPU the comparison reads
# them in place.
SAVED_ON_GPU_SHARE = 0.05
# Page-locked host memory one `HostCopies` may hold: at most this share of the machine's memory.
PINNED_SHARE = 0.05
PINNED_MAX_BYTES = 8 << 30
# Cached but unused GPU memory the supervisor keeps (`release_cached`): more goes back to the driver.
RELEASE_ABOVE_BYTES = 1 << 30


class SavedPlace:
    """Where a reference's saved tensors live: on `device` while they fit `budget` bytes (by
    default SAVED_ON_GPU_SHARE of a GPU's memory, nothing on the CPU), then on the CPU."""

    def __init__(self, device: str, budget: int | None = None):
        self.device = device
        if budget is None and device == "cuda":
            total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
            budget = int(SAVED_ON_GPU_SHARE * total)
        self.left = budget or 0

    def place(self, t: torch.Tensor) -> torch.Tensor:
        nbytes = tensor_nbytes(t)
        if self.device != "cpu" and nbytes <= self.left:
            self.left -= nbytes
            return t.detach().to(self.device)
        return t.detach().cpu()


def _pinned_like(t: torch.Tensor) -> torch.Tensor:
    return torch.empty(t.shape, dtype=t.dtype, pin_memory=True)


def default_pinned_budget() -> int:
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0
    return int(min(PINNED_MAX_BYTES, PINNED_SHARE * total))


class HostCopies:
    """Host copies (`copy`) of tensors on the CPU or a GPU, for an evaluation on `device`: on a
    GPU evaluation in page-locked memory while `budget` bytes last (by default PINNED_SHARE of the
    machine's memory, at most PINNED_MAX_BYTES), in pageable memory beyond and on the CPU.
    `empty_pinned` makes the page-locked tensor (injectable: page-locking needs CUDA)."""

    def __init__(
        self,
        device: str,
        budget: int | None = None,
        empty_pinned: Callable[[torch.Tensor], torch.Tensor] = _pinned_like,
    ):
        self.left = 0 if device == "cpu" else (default_pinned_budget() if budget is None else budget)
        self.empty_pinned = empty_pinned

    def on_host(self, t: torch.Tensor) -> torch.Tensor:
        """`t` itself when it is on the CPU, else a host copy of it."""
        return t.detach() if t.device.type == "cpu" else self.copy(t)

    def copy(self, t: torch.Tensor) -> torch.Tensor:
        """A host copy of `t`, sharing nothing with it."""
        t = t.detach()
        nbytes = tensor_nbytes(t)
        if 0 < nbytes <= self.left:
            try:
                host = self.empty_pinned(t)
            except RuntimeError:  # the driver would not lock more: pageable from now on
                self.left = 0
            else:
                self.left -= nbytes
                return host.copy_(t)
        return t.to("cpu", copy=True)


def release_cached(
    device: str,
    *,
    above: int = RELEASE_ABOVE_BYTES,
    unused: Callable[[], int] | None = None,
    empty_cache: Callable[[], None] | None = None,
) -> bool:
    """Give the GPU memory this process's allocator keeps cached but unused back to the driver,
    when it is more than `above` bytes (a CUDA evaluation; `unused` and `empty_cache`
    injectable); whether it did. The reference's forward and float64 passes leave their peak
    reserved in the supervisor, and the solution process, another process, allocates only from
    what is free: on an H100 level3/31's 8 GiB case ran out of memory beside 57 GB the
    supervisor kept, even with the GPU to itself, and an honest solution was judged incorrect.

    Called only while the evaluation holds a GPU turn (freeing device memory is device work:
    never beside another evaluation's timed second); below `above` the cache stays, since
    allocating it again costs the next phase time."""
    if device != "cuda":
        return False
    if (unused or _unused_cached)() <= above:
        return False
    (empty_cache or torch.cuda.empty_cache)()
    return True


def _unused_cached() -> int:
    return torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
