"""Collecting kernel evidence while a forward runs: which aten ops were dispatched, which Triton
interpreter programs ran, which device kernels the profiler saw.

Collectors only: judging the evidence is `kernels`' job. In the solution process everything
collected here is evidence the supervisor checks, never a verdict. The supervisor also uses
`OpRecorder` on the reference, to know which compute ops are the problem's main work.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode


class OpRecorder(TorchDispatchMode):
    """Every aten op dispatched inside the `with` block: its count and its exclusive host time."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}
        self.seconds: dict[str, float] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        name = func.overloadpacket.__name__
        started = time.perf_counter()
        try:
            return func(*args, **(kwargs or {}))
        finally:
            self.counts[name] = self.counts.get(name, 0) + 1
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started

    def summary(self) -> dict[str, list[float]]:
        """op name -> [count, seconds]."""
        return {name: [self.counts[name], self.seconds[name]] for name in self.counts}


@dataclass
class ProgramLog:
    """Triton interpreter launches that completed while `recording`: kernel name, programs run."""

    recording: bool = False
    launches: list[tuple[str, int]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    seconds: float = 0.0  # wall time spent inside completed launches' programs
    dot_flops: float = 0.0  # multiply-adds x 2 done by tl.dot in those programs
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def note(self, name: str, programs: int, completed: bool, seconds: float = 0.0) -> None:
        if not self.recording:
            return
        with self._lock:
            (self.launches.append((name, programs)) if completed else self.failed.append(name))
            if completed and programs > 0:
                self.seconds += seconds

    def reset(self) -> None:
        with self._lock:
            self.launches.clear()
            self.failed.clear()
            self.seconds = 0.0
            self.dot_flops = 0.0


def install_program_counter(log: ProgramLog) -> bool:
    """Count interpreter programs where they execute (the grid loop), not at the launch wrapper:
    a launch with an empty grid runs no program, and one that raised does not count."""
    try:
        from triton.runtime import interpreter
    except Exception:
        return False
    executor = interpreter.GridExecutor
    original = executor.__call__
    if getattr(original, "_kbv3_counted", False):
        return True

    def call(self, *args, **kwargs):  # noqa: ANN001
        name = str(getattr(self.fn, "__name__", "kernel"))
        interpreter.interpreter_builder.grid_dim = (0, 0, 0)
        started = time.perf_counter()
        try:
            result = original(self, *args, **kwargs)
        except BaseException:
            log.note(name, 0, False)
            raise
        log.note(name, math.prod(interpreter.interpreter_builder.grid_dim), True, time.perf_counter() - started)
        return result

    call._kbv3_counted = True  # type: ignore[attr-defined]
    executor.__call__ = call
    builder = interpreter.InterpreterBuilder
    dot = builder.create_dot

    def counted_dot(self, a, b, d, *args, **kwargs):  # noqa: ANN001
        if log.recording:
            log.dot_flops += 2.0 * float(a.data.size) * float(b.data.shape[-1])
        return dot(self, a, b, d, *args, **kwargs)

    builder.create_dot = counted_dot
    return True


def profile_device(fn: Any) -> tuple[Any, list[list[Any]] | None]:
    """Run `fn()` under the CUDA profiler: its result and [name, device microseconds] per kernel
    name (None when the profiler is unavailable; then `fn` still ran, unprofiled)."""
    from .kernels import profile_cuda

    result, times = profile_cuda(fn)
    return result, None if times is None else [[name, us] for name, us in times]


def dynamo_frames() -> int:
    """How many frames torch.compile has compiled so far in this process."""
    try:
        from torch._dynamo.utils import counters
    except Exception:
        return 0
    return int(sum(counters["frames"].values())) if "frames" in counters else 0


def collect(fn: Any, device: str, programs: ProgramLog, profile: bool = True) -> tuple[Any, dict[str, Any]]:
    """Run `fn()` once with the collectors on (the CUDA profiler only when `profile`: it is slow
    to start); returns its result and the evidence."""
    recorder = OpRecorder()
    programs.reset()
    programs.recording = True
    started = time.perf_counter()
    try:
        with recorder:
            if device == "cuda" and profile:
                result, kernels = profile_device(fn)
            else:
                result, kernels = fn(), None
    finally:
        programs.recording = False
        forward_s = time.perf_counter() - started
    evidence = {
        "ops": recorder.summary(),
        "programs": [[name, n] for name, n in programs.launches],
        "failed_launches": list(programs.failed),
        "program_seconds": programs.seconds,
        "dot_flops": programs.dot_flops,
        "forward_seconds": forward_s,
        "device_kernels": kernels,
        "profiler": device != "cuda" or kernels is not None,  # on CUDA: the device kernels were seen
        # The solution process is fresh and the evaluator compiles nothing in it, so any frame
        # torch.compile compiled so far is the solution's (compiled code that already ran
        # dispatches no aten ops, so this is how a compiled forward shows).
        "compiled_frames": dynamo_frames(),
    }
    return result, evidence
