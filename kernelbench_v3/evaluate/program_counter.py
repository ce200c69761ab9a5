"""The Triton interpreter's launches, observed where they run: programs, time, bytes, stores.

`install_program_counter` wraps the interpreter (TRITON_INTERPRET=1) in the solution process,
before any solution code is imported:

- `InterpretedFunction.run` (a launch, from `kernel[grid](...)` to its end): its wall time is
  the programs' own, the interpreter's per-launch and per-program cost included (rewriting the
  body, converting arguments, the evaluator's own bookkeeping), so `main_work` never charges an
  honest wide-block kernel for the interpreter's overhead;
- `GridExecutor.__call__` (the grid loop): the programs run (a launch with an empty grid or one
  that raised runs none), the kernel body's reach (`kernel_reach`: a body that reaches beyond
  triton.language is refused), and the launch's place in the forward's provenance;
- the builder's loads, stores, atomics and `tl.dot`: bytes moved, FLOPs, and every store, so
  that the launch's end leaves exactly what the programs stored (`provenance`).

Only the thread that runs the forward is observed (`ProgramLog.observing`): a launch from another
thread is none of the forward's work. Collectors only: what is recorded is evidence the
supervisor judges.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .provenance import Provenance

MAX_REFUSED = 20  # refused launches reported


@dataclass
class ProgramLog:
    """Triton interpreter launches that completed while `recording`: kernel name, programs run."""

    recording: bool = False
    launches: list[tuple[str, int]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    seconds: float = 0.0  # wall time of completed launches, the interpreter's own cost included
    dot_flops: float = 0.0  # multiply-adds x 2 done by tl.dot in those programs
    bytes_moved: float = 0.0  # bytes the programs loaded and stored (masked-off lanes excluded)
    provenance: Provenance | None = None  # when set (CPU), launches update it
    # For the life of the process, never reset: refused launches (why), calls whose output was
    # one of their inputs or that changed one, launches whose memory something else wrote while they ran.
    refused: list[str] = field(default_factory=list)
    aliased_calls: int = 0
    mutated_calls: int = 0  # calls that changed one of their inputs
    overwritten: list[str] = field(default_factory=list)
    owner: int | None = None  # the thread whose forward is being recorded (None: any)
    _depth: int = 0  # launches in progress (a launch inside a launch's hooks is the outer one's)
    _ran: bool = False  # the outer launch ran programs
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # The clock of a launch's time; None: `time.perf_counter` as the forward's own time reads it
    # (a patched one skews both alike). Tests inject one.
    clock: Callable[[], float] | None = field(default=None, repr=False)

    def note(self, name: str, programs: int, completed: bool) -> None:
        if not self.observing():
            return
        with self._lock:
            (self.launches.append((name, programs)) if completed else self.failed.append(name))
            self._ran |= completed and programs > 0

    def observing(self) -> bool:
        """Recording, on the thread that runs the forward: a launch from another thread is none
        of the forward's work, and what it stores is memory written behind its back."""
        return self.recording and (self.owner is None or threading.get_ident() == self.owner)

    def refuse(self, why: str) -> None:
        if len(self.refused) < MAX_REFUSED:
            self.refused.append(why[:400])

    def reset(self) -> None:
        with self._lock:
            self.launches.clear()
            self.failed.clear()
            self.seconds = 0.0
            self.dot_flops = 0.0
            self.bytes_moved = 0.0


def install_program_counter(log: ProgramLog) -> bool:
    """Wrap the interpreter (module docstring); False when Triton's interpreter is absent."""
    try:
        from triton.runtime import interpreter
    except Exception:
        return False
    executor, function = interpreter.GridExecutor, interpreter.InterpretedFunction
    original, original_run = executor.__call__, function.run
    if getattr(original, "_kbv3_counted", False):
        return True
    import numpy as np

    from .kernel_reach import KernelReachError, Snapshot, check_launch, freeze

    def run(self, *args, **kwargs):  # noqa: ANN001
        outer = log._depth == 0
        log._depth += 1
        if outer:
            log._ran = False
        clock = log.clock or time.perf_counter
        started = clock()
        try:
            return original_run(self, *args, **kwargs)
        finally:
            log._depth -= 1
            if outer and log._ran and log.observing():
                log.seconds += clock() - started

    def call(self, *args, **kwargs):  # noqa: ANN001
        name = str(getattr(self.fn, "__name__", "kernel"))
        why = check_launch(snapshot, self.fn, name, args, kwargs)
        if why:
            log.refuse(f"{name}: {why[0]}")
            log.note(name, 0, False)
            raise KernelReachError(f"the kernel {name} reaches beyond triton.language: {'; '.join(why[:3])}")
        # The check again where the grid is evaluated, after the pre-run hooks and the grid
        # function (solution code the launch runs), on what the programs will receive; then the
        # body runs frozen to what was checked (`kernel_reach.freeze`).
        grid = self.grid

        def checked_grid(call_args):  # noqa: ANN001
            shape = grid(call_args) if callable(grid) else grid
            late = check_launch(snapshot, self.fn, name, (), call_args)
            if late:
                log.refuse(f"{name}: {late[0]}")
                raise KernelReachError(f"the kernel {name} reaches beyond triton.language: {'; '.join(late[:3])}")
            self.fn = freeze(snapshot, self.fn)
            return shape

        self.grid = checked_grid
        interpreter.interpreter_builder.grid_dim = (0, 0, 0)
        provenance = log.provenance if log.observing() else None  # this launch's, to the end
        if provenance is not None:
            provenance.keep((args, kwargs))
            provenance.enter()
            provenance.begin_launch()
        try:
            result = original(self, *args, **kwargs)
        except BaseException:
            log.note(name, 0, False)
            raise
        finally:
            if provenance is not None:
                if provenance.end_launch():
                    log.overwritten.append(name)
                provenance.leave()
        log.note(name, math.prod(interpreter.interpreter_builder.grid_dim), True)
        return result

    call._kbv3_counted = True  # type: ignore[attr-defined]
    executor.__call__, function.run = call, run
    builder = interpreter.InterpreterBuilder
    dot, load, store = builder.create_dot, builder.create_masked_load, builder.create_masked_store
    rmw, cas = builder.create_atomic_rmw, builder.create_atomic_cas

    def counted_dot(self, a, b, d, *args, **kwargs):  # noqa: ANN001
        if log.observing():
            log.dot_flops += 2.0 * float(a.data.size) * float(b.data.shape[-1])
        return dot(self, a, b, d, *args, **kwargs)

    def active(ptrs, mask):  # noqa: ANN001
        data = np.asarray(ptrs.data)
        return data[np.broadcast_to(mask.data, data.shape)]

    def counted_load(self, ptrs, mask, *args, **kwargs):  # noqa: ANN001
        loaded = load(self, ptrs, mask, *args, **kwargs)
        if log.observing():
            at = active(ptrs, mask)
            log.bytes_moved += int(at.size) * loaded.data.itemsize
            if log.provenance is not None:
                log.provenance.load(at, loaded.data.itemsize)
        return loaded

    def counted_store(self, ptrs, value, mask, *args, **kwargs):  # noqa: ANN001
        if log.observing():
            data = np.asarray(ptrs.data)
            lanes = np.broadcast_to(mask.data, data.shape)
            at = data[lanes]
            log.bytes_moved += int(at.size) * value.data.itemsize
            if log.provenance is not None:
                values = np.broadcast_to(np.asarray(value.data), data.shape)[lanes]
                log.provenance.store(at, values)
        return store(self, ptrs, value, mask, *args, **kwargs)

    def atomic(original_op, ptrs, mask, self, *args):  # noqa: ANN001
        """An atomic reads and writes: its bytes count as loaded, and what it left as stored."""
        result = original_op(self, *args)
        if log.observing() and log.provenance is not None:
            data = np.asarray(ptrs.data)
            at = data[np.broadcast_to(mask.data, data.shape)] if mask is not None else data.ravel()
            itemsize = result.data.itemsize
            log.provenance.load(at, itemsize)
            after = np.array([np.frombuffer(_read(int(a), itemsize), dtype=result.data.dtype)[0] for a in at])
            log.provenance.store(at, after.astype(result.data.dtype) if at.size else np.empty(0, result.data.dtype))
        return result

    def counted_rmw(self, op, ptr, val, mask, *args, **kwargs):  # noqa: ANN001
        return atomic(lambda s, *a: rmw(s, op, ptr, val, mask, *args, **kwargs), ptr, mask, self)

    def counted_cas(self, ptr, cmp, val, *args, **kwargs):  # noqa: ANN001
        return atomic(lambda s, *a: cas(s, ptr, cmp, val, *args, **kwargs), ptr, None, self)

    builder.create_dot = counted_dot
    builder.create_masked_load, builder.create_masked_store = counted_load, counted_store
    builder.create_atomic_rmw, builder.create_atomic_cas = counted_rmw, counted_cas
    snapshot = Snapshot()  # after the wraps: they are the interpreter now
    return True


def _read(address: int, nbytes: int) -> bytes:
    import ctypes

    return ctypes.string_at(address, nbytes)
