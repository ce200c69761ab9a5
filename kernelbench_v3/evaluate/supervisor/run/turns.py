"""Turns on one GPU between the evaluations that share it (a batch's workers on one GPU).

Two evaluations may overlap on a GPU only where neither is timed and no solution's code can
reach the other's timing: while one solution process runs its cases, the next evaluation's
reference phase runs beside it; a solution process and every timed second have the GPU to
themselves. Two locks per GPU, lent by a `Lender` that only trusted processes can reach (the
batch's parent, over each worker's own pipe: `batch.gpu_share`); a solution process holds no
handle on them, so it can neither take nor free a turn:

- `solution()`, the solution lock held exclusive: a solution process exists only under it, from
  before its fork to after its reap, so at most one solution process per GPU ever runs, and it
  can slow or watch no other solution.
- `timing()`, the GPU lock held exclusive, taken inside `solution()`: calibrating the idle device
  and timing the solution. Nothing else of any evaluation runs on the GPU then.
- `trusted(alone=False)`, the GPU lock held shared: the supervisor's own GPU work before its
  solution process exists (the reference phase). It waits out the other's timing, and that
  timing waits for it; it may run beside the other's solution process, whose code cannot reach
  this process's memory (a failure there is retried alone: `evaluation._compute`).
  `trusted(alone=True)`, both locks exclusive: a cold baseline, whose child compiles and times the
  reference, so no solution process exists and nothing else runs while it does.

Locks are always taken solution lock first, GPU lock second, and a process never holds one lock
twice, so no two evaluations can wait for each other. Before a GPU turn is given back, the device
finishes the work queued under it (`torch.cuda.synchronize`): work launched under a turn ends
under it, and never spills into another's timing.

`ALONE` (no lender) grants every turn at once: an evaluation that shares its GPU with no one
(`kbv3 eval`, `serve`, a batch with one worker per GPU, the CPU).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol

SOLUTION_LOCK = "solution"
GPU_LOCK = "gpu"


class Lender(Protocol):
    """Lends a GPU's locks: `take` blocks until `lock` is granted (shared or exclusive)."""

    def take(self, lock: str, shared: bool) -> None: ...

    def give(self, lock: str) -> None: ...


class GpuTurns:
    """The turns of one GPU, its locks lent by `lender`; `None`: unshared (module docstring)."""

    def __init__(self, lender: Lender | None):
        self.lender = lender

    @property
    def shared(self) -> bool:
        return self.lender is not None

    @contextlib.contextmanager
    def solution(self) -> Iterator[None]:
        """A solution process may exist (spawn to reap)."""
        with self._lock(SOLUTION_LOCK, shared=False):
            yield

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        """The GPU to this evaluation alone: calibration and timing (inside `solution`)."""
        with self._lock(GPU_LOCK, shared=False), _finished_on_device(self.shared):
            yield

    @contextlib.contextmanager
    def trusted(self, alone: bool) -> Iterator[None]:
        """The supervisor's own GPU work with no solution process of its own: beside the other's
        solution process, or (`alone`) with the GPU to itself."""
        with contextlib.ExitStack() as held:
            if alone:
                held.enter_context(self._lock(SOLUTION_LOCK, shared=False))
            held.enter_context(self._lock(GPU_LOCK, shared=not alone))
            held.enter_context(_finished_on_device(self.shared))
            yield

    @contextlib.contextmanager
    def _lock(self, name: str, shared: bool) -> Iterator[None]:
        if self.lender is None:
            yield
            return
        self.lender.take(name, shared)
        try:
            yield
        finally:
            self.lender.give(name)


@contextlib.contextmanager
def _finished_on_device(shared: bool) -> Iterator[None]:
    """On leaving, wait for the device to finish what this process queued (a shared GPU only)."""
    try:
        yield
    finally:
        if shared:
            _synchronize()


def _synchronize() -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        try:
            torch.cuda.synchronize()
        except RuntimeError:  # a lost context has nothing left to finish; the evaluation reports it
            pass


ALONE = GpuTurns(None)

__all__ = ["ALONE", "GPU_LOCK", "SOLUTION_LOCK", "GpuTurns", "Lender"]
