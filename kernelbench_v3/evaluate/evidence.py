"""Collecting kernel evidence while a forward runs: which aten ops were dispatched, which Triton
interpreter programs ran, which device kernels the profiler saw.

Collectors only: judging the evidence is `kernels`' job. In the solution process everything
collected here is evidence the supervisor checks, never a verdict. The supervisor also uses
`OpRecorder` on the reference, to know which compute ops are the problem's main work.
"""

from __future__ import annotations

import ctypes
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..hardware.roofline import iter_tensors


def _tensor_bytes(values: Any) -> int:
    """Bytes of the tensors among `values`."""
    return sum(t.numel() * t.element_size() for t in iter_tensors(values))


SMALL_BYTES = 1024  # tensors this small (scalars, tiny constants) are never counted as foreign
# In-place ops whose result does not depend on what the memory they write held before.
OVERWRITING_OPS = frozenset({"copy_", "fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_"})


def _storages(values: Any) -> list[tuple[int, int]]:
    """(data pointer, bytes) of the storages of the tensors among `values`."""
    found = []
    for t in iter_tensors(values):
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # tensors without storage (meta, sparse...)
            continue
        found.append((storage.data_ptr(), storage.nbytes()))
    return found


class Provenance:
    """Where the memory of one forward came from, by storage (CPU).

    Known: the forward's inputs, the model's and the solution module's tensors as the forward
    starts, and whatever PyTorch ops or the solution's programs made from known memory alone.
    Foreign: memory that appeared without passing through PyTorch or the programs (numpy, ctypes)
    and anything made from it, including what a program stored after loading from it. A forward
    whose output is foreign did its work outside its kernels, however its kernels were spent.

    Memory PyTorch made can still be written behind the dispatcher's back (numpy through
    `out.numpy()`, ctypes through `data_ptr()`): every storage an op or a program wrote is kept
    as a copy when the op or launch ends, and compared when the next one starts and when the
    forward ends; one that changed in between is foreign."""

    def __init__(self) -> None:
        self.known: set[int] = set()
        self.foreign: set[int] = set()
        # Every tensor it has judged stays alive until the forward ends: freed memory that numpy
        # reused would otherwise carry a known address.
        self.kept: list[Any] = []
        self.sources: set[int] = set()
        self.watched: dict[int, int] = {}  # storages ops and programs wrote -> bytes
        self.copies: dict[int, bytes] = {}  # their contents when the last op or launch ended
        self.depth = 0  # ops a launch runs, and launches inside ops, are part of the outer event

    def enter(self) -> None:
        """An op or a launch starts: what changed since the last one ended was written unseen."""
        if self.depth == 0:
            changed = [(p, len(c)) for p, c in self.copies.items() if ctypes.string_at(p, len(c)) != c]
            self._mark(changed, True)
        self.depth += 1

    def leave(self) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.copies = {p: ctypes.string_at(p, n) for p, n in self.watched.items()}

    def _watch(self, storages: list[tuple[int, int]]) -> None:
        for ptr, n in storages:  # every one is kept alive (`keep`) until the forward ends
            if n > SMALL_BYTES and ptr not in self.sources:
                self.watched[ptr] = n

    def keep(self, values: Any) -> None:
        self.kept.append(values)

    def seed(self, values: Any) -> None:
        for ptr, _ in _storages(values):
            self.known.add(ptr)
            self.sources.add(ptr)

    def is_foreign(self, ptr: int, nbytes: int) -> bool:
        if ptr in self.foreign:
            return True
        return ptr not in self.known and nbytes > SMALL_BYTES

    def _mark(self, storages: list[tuple[int, int]], foreign: bool) -> None:
        for ptr, _ in storages:
            (self.foreign.add if foreign else self.foreign.discard)(ptr)
            (self.known.discard if foreign else self.known.add)(ptr)

    def after_op(self, name: str, args: Any, kwargs: Any, result: Any) -> None:
        """An op's results (and the tensors it wrote in place, which are among them or its
        arguments) are foreign when any tensor it read is. A fill reads no tensor, and a copy
        only its source: the old contents of the memory they write do not matter."""
        self.keep((args, kwargs, result))
        if name in OVERWRITING_OPS:
            args = args[1:] if args else args
        read = _storages(args) + _storages(kwargs)
        tainted = any(self.is_foreign(ptr, n) for ptr, n in read)
        made = _storages(result)
        self._watch(made)
        self._mark(made, tainted)
        if tainted:  # an in-place op or an out= argument took the foreign values
            written = {ptr for ptr, _ in made}
            self._mark([(ptr, n) for ptr, n in read if ptr in written], True)

    def after_launch(self, loaded: dict[int, tuple[int, float]], stored: dict[int, int]) -> None:
        """A program launch: what it stored is foreign when it loaded any foreign bytes."""
        tainted = any(b > 0 and self.is_foreign(ptr, n) for ptr, (n, b) in loaded.items())
        self._watch(list(stored.items()))
        self._mark(list(stored.items()), tainted)


class OpRecorder(TorchDispatchMode):
    """Every aten op dispatched inside the `with` block: its count, its exclusive host time and
    the bytes of the tensors it read and wrote (its arguments and its results)."""

    def __init__(self, provenance: Provenance | None = None) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}
        self.seconds: dict[str, float] = {}
        self.bytes: dict[str, int] = {}
        self.provenance = provenance

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        name = func.overloadpacket.__name__
        if self.provenance is not None:
            self.provenance.enter()
        started = time.perf_counter()
        result = None
        try:
            result = func(*args, **(kwargs or {}))
            return result
        finally:
            self.counts[name] = self.counts.get(name, 0) + 1
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
            moved = _tensor_bytes(args) + _tensor_bytes(kwargs or {}) + _tensor_bytes(result)
            self.bytes[name] = self.bytes.get(name, 0) + moved
            if self.provenance is not None:
                self.provenance.after_op(name, args, kwargs or {}, result)
                self.provenance.leave()

    def summary(self) -> dict[str, list[float]]:
        """op name -> [count, seconds, bytes]."""
        return {name: [self.counts[name], self.seconds[name], self.bytes[name]] for name in self.counts}


@dataclass
class ProgramLog:
    """Triton interpreter launches that completed while `recording`: kernel name, programs run."""

    recording: bool = False
    launches: list[tuple[str, int]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    seconds: float = 0.0  # wall time spent inside completed launches' programs
    dot_flops: float = 0.0  # multiply-adds x 2 done by tl.dot in those programs
    bytes_moved: float = 0.0  # bytes the programs loaded and stored (masked-off lanes excluded)
    provenance: Provenance | None = None  # when set (CPU), launches update it
    # During one launch: its tensor arguments' storages (ptr -> (bytes, bytes loaded from it)), and
    # which of them it stored into.
    _loaded: dict[int, tuple[int, float]] = field(default_factory=dict, repr=False)
    _stored: dict[int, int] = field(default_factory=dict, repr=False)
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
            self.bytes_moved = 0.0


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
        provenance = log.provenance if log.recording else None  # this launch's, to the end
        if provenance is not None:
            provenance.keep((args, kwargs))
            provenance.enter()
            log._loaded = {ptr: (n, 0.0) for ptr, n in _storages([list(args), kwargs])}
            log._stored = {}
        started = time.perf_counter()
        try:
            result = original(self, *args, **kwargs)
        except BaseException:
            log.note(name, 0, False)
            raise
        finally:
            if provenance is not None:
                provenance.after_launch(log._loaded, log._stored)
                provenance.leave()
                log._loaded, log._stored = {}, {}
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
    load, store = builder.create_masked_load, builder.create_masked_store

    import numpy as np

    def lanes(ptrs, mask):  # noqa: ANN001
        return np.broadcast_to(mask.data, np.shape(ptrs.data))

    def per_storage(ptrs, active, itemsize: int, loading: bool) -> None:  # noqa: ANN001
        """Attribute a load's or store's bytes to the launch's argument storages."""
        addresses = np.asarray(ptrs.data).astype(np.uint64, copy=False)
        for ptr, (n, loaded) in list(log._loaded.items()):
            inside = int(np.count_nonzero(active & (addresses >= ptr) & (addresses < ptr + n)))
            if inside and loading:
                log._loaded[ptr] = (n, loaded + inside * itemsize)
            elif inside:
                log._stored[ptr] = n

    def counted_load(self, ptrs, mask, *args, **kwargs):  # noqa: ANN001
        loaded = load(self, ptrs, mask, *args, **kwargs)
        if log.recording:
            active = lanes(ptrs, mask)
            log.bytes_moved += int(np.count_nonzero(active)) * loaded.data.itemsize
            if log._loaded:
                per_storage(ptrs, active, loaded.data.itemsize, True)
        return loaded

    def counted_store(self, ptrs, value, mask, *args, **kwargs):  # noqa: ANN001
        if log.recording:
            active = lanes(ptrs, mask)
            log.bytes_moved += int(np.count_nonzero(active)) * value.data.itemsize
            if log._loaded:
                per_storage(ptrs, active, value.data.itemsize, False)
        return store(self, ptrs, value, mask, *args, **kwargs)

    builder.create_masked_load, builder.create_masked_store = counted_load, counted_store
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


def collect(
    fn: Any, device: str, programs: ProgramLog, profile: bool = True, sources: Any = None
) -> tuple[Any, dict[str, Any]]:
    """Run `fn()` once with the collectors on (the CUDA profiler only when `profile`: it is slow
    to start); returns its result and the evidence. On CPU, with `sources` (the tensors the
    forward may start from: its inputs, the model's and the module's tensors), the provenance of
    its output is traced too (`output_foreign`)."""
    provenance = None
    if device == "cpu" and sources is not None:
        provenance = Provenance()
        provenance.seed(sources)
    recorder = OpRecorder(provenance)
    programs.reset()
    programs.provenance = provenance
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
        programs.provenance = None
        forward_s = time.perf_counter() - started
    output_foreign = None
    if provenance is not None:
        provenance.enter()  # the forward's end: what changed since the last op or launch was written unseen
    if provenance is not None and isinstance(result, torch.Tensor):
        output_foreign = any(provenance.is_foreign(ptr, n) for ptr, n in _storages(result))
    evidence = {
        "ops": recorder.summary(),
        "programs": [[name, n] for name, n in programs.launches],
        "failed_launches": list(programs.failed),
        "program_seconds": programs.seconds,
        "dot_flops": programs.dot_flops,
        "program_bytes": programs.bytes_moved,
        "output_foreign": output_foreign,
        "forward_seconds": forward_s,
        "device_kernels": kernels,
        "profiler": device != "cuda" or kernels is not None,  # on CUDA: the device kernels were seen
        # The solution process is fresh and the evaluator compiles nothing in it, so any frame
        # torch.compile compiled so far is the solution's (compiled code that already ran
        # dispatches no aten ops, so this is how a compiled forward shows).
        "compiled_frames": dynamo_frames(),
    }
    return result, evidence
