"""Where the bytes of one forward came from (CPU), by byte range, and what a launch may leave.

Known bytes: the forward's inputs, the model's and the solution module's tensors as the forward
starts, and whatever PyTorch ops or the solution's programs made from known bytes alone. Foreign
bytes: memory that appeared without passing through PyTorch or the programs (numpy, ctypes), the
uninitialized memory of an allocation, and anything made from foreign bytes. A forward whose
output holds foreign bytes did its work outside its kernels, however its kernels were spent.

Ranges, not storages: the timing region is one storage holding every input set and output slot,
so a storage-wide mark would make a whole region known because one set was an input; here only
the bytes a tensor spans are marked, and a view that reaches past its base's bytes marks nothing.

Every range an op or a program wrote, and every source, is watched: a copy of its bytes is kept
and compared whenever an op or a launch starts and when the forward ends; a range that changed in
between was written behind the dispatcher's back (numpy through `x.numpy()`, ctypes through
`data_ptr()`) and is foreign. During a launch the copies follow the programs' own stores
(`store`), so at its end (`end_launch`) memory must equal what the programs stored on top of what
was there: bytes anything else wrote meanwhile (a thread, numpy in a kernel body or in a launch
hook) are put back, by construction, and the launch is reported (`overwritten`).
"""

from __future__ import annotations

import ctypes
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..hardware.roofline import iter_tensors

SMALL_BYTES = 1024  # unknown bytes up to this many (scalars, tiny constants) are never foreign
# In-place ops whose result does not depend on what the memory they write held before.
OVERWRITING_OPS = frozenset({"copy_", "fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_"})
# Ops whose results are memory nobody wrote yet: uninitialized, so foreign until stored.
ALLOCATING_OPS = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "resize_"})
# In-place ops that change what a tensor points at, not the bytes: they make nothing known.
METADATA_OPS = frozenset(
    {"set_", "as_strided_", "resize_as_", "squeeze_", "unsqueeze_", "transpose_", "t_", "detach_", "swapdims_"}
)
KNOWN, FOREIGN = 0, 1
_memcmp = ctypes.CDLL(None).memcmp
_memcmp.restype = ctypes.c_int
_memcmp.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)


def byte_span(t: torch.Tensor) -> tuple[int, int]:
    """[first, last + 1) of the bytes a tensor's elements lie in (its view, not its storage)."""
    if t.numel() == 0:
        return (0, 0)
    try:
        lo = t.data_ptr()
    except (RuntimeError, NotImplementedError):  # tensors without storage (meta, sparse...)
        return (0, 0)
    if lo == 0:
        return (0, 0)
    reach = sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride()))
    return (lo, lo + (reach + 1) * t.element_size())


EXACT_ELEMENTS = 1 << 24  # a strided view's byte runs are worked out up to this many elements


def exact_runs(t: torch.Tensor) -> list[tuple[int, int]] | None:
    """The byte runs a tensor's elements cover: its span when it is contiguous, else worked out
    from its strides (a column view spans the whole matrix but covers one element per row);
    None when that is too many elements to work out."""
    lo, hi = byte_span(t)
    if hi <= lo or t.is_contiguous() or _dense(t):
        return [(lo, hi)] if hi > lo else []
    if t.numel() > EXACT_ELEMENTS:
        return None
    offsets = np.zeros(1, dtype=np.int64)
    for size, stride in zip(t.shape, t.stride()):
        offsets = (offsets[:, None] + np.arange(size, dtype=np.int64) * stride).ravel()
    return runs(np.uint64(lo) + (offsets * t.element_size()).astype(np.uint64), t.element_size())


def _dense(t: torch.Tensor) -> bool:
    """Its elements tile its span without gaps or overlaps (a transpose, a permutation)."""
    expected = 1
    for stride, size in sorted((abs(s), n) for n, s in zip(t.shape, t.stride()) if n > 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _spanned(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and byte_span(x)[1] > byte_span(x)[0]


def _read(lo: int, hi: int) -> np.ndarray:
    copy = np.empty(hi - lo, dtype=np.uint8)
    ctypes.memmove(copy.ctypes.data, lo, hi - lo)
    return copy


def spans(values: Any) -> list[tuple[int, int]]:
    return [s for t in iter_tensors(values) if (s := byte_span(t))[1] > s[0]]


@dataclass
class Sources:
    """What a forward may start from: its inputs (`inputs`, in argument order) and other tensors
    (the model's and the solution module's)."""

    inputs: list[Any]
    others: list[Any] = field(default_factory=list)


class ByteMap:
    """Disjoint byte intervals, each KNOWN or FOREIGN; bytes in none are unknown."""

    def __init__(self) -> None:
        self.lo: list[int] = []
        self.hi: list[int] = []
        self.state: list[int] = []

    def set(self, lo: int, hi: int, state: int) -> None:
        if hi <= lo:
            return
        i = bisect_right(self.hi, lo)  # the first interval ending after lo
        j = i
        keep: list[tuple[int, int, int]] = []
        while j < len(self.lo) and self.lo[j] < hi:
            a, b, s = self.lo[j], self.hi[j], self.state[j]
            if a < lo:
                keep.append((a, lo, s))
            if b > hi:
                keep.append((hi, b, s))
            j += 1
        parts = sorted([*keep, (lo, hi, state)])
        self.lo[i:j] = [p[0] for p in parts]
        self.hi[i:j] = [p[1] for p in parts]
        self.state[i:j] = [p[2] for p in parts]

    def query(self, lo: int, hi: int) -> tuple[bool, int]:
        """(any foreign byte in [lo, hi), how many bytes of it are unknown)."""
        covered, foreign = 0, False
        j = bisect_right(self.hi, lo)
        while j < len(self.lo) and self.lo[j] < hi:
            covered += min(hi, self.hi[j]) - max(lo, self.lo[j])
            foreign |= self.state[j] == FOREIGN
            j += 1
        return foreign, (hi - lo) - covered


def runs(addresses: np.ndarray, itemsize: int) -> list[tuple[int, int]]:
    """The exact byte ranges that elements of `itemsize` bytes at `addresses` cover."""
    a = np.asarray(addresses, dtype=np.uint64).ravel()
    if a.size == 0:
        return []
    if a.size == 1 or bool(np.all(np.diff(a.astype(np.int64)) == itemsize)):
        return [(int(a[0]), int(a[-1]) + itemsize)]
    a = np.unique(a).astype(np.int64)
    breaks = np.nonzero(np.diff(a) > itemsize)[0]
    starts = np.concatenate(([a[0]], a[breaks + 1]))
    ends = np.concatenate((a[breaks], [a[-1]])) + itemsize
    return [(int(s), int(e)) for s, e in zip(starts, ends)]


class Provenance:
    """The byte map of one forward, its watched copies and the launch in progress (module doc)."""

    def __init__(self) -> None:
        self.map = ByteMap()
        # Every tensor it has judged stays alive until the forward ends: freed memory that numpy
        # reused would otherwise carry a known address.
        self.kept: list[Any] = []
        self.watched: dict[tuple[int, int], np.ndarray] = {}  # range -> its bytes when last seen
        self.depth = 0  # ops a launch runs, and launches inside ops, are part of the outer event
        self.tainted = False  # the launch in progress loaded foreign or unknown bytes
        self.unknown_loaded = 0  # unknown bytes it loaded so far
        self.stored: list[tuple[int, int]] = []  # the byte ranges its programs stored
        self.original: dict[int, tuple[tuple[int, int], np.ndarray]] = {}  # input -> (span, first bytes)

    # --- the map ------------------------------------------------------------------------

    def seed(self, sources: Sources) -> None:
        for t in iter_tensors([sources.inputs, sources.others]):
            self._mark_known(t)
        for lo, hi in spans([sources.inputs, sources.others]):
            self._watch(lo, hi)
        for i, x in enumerate(sources.inputs):
            if _spanned(x):
                span = byte_span(x)
                self.original[i] = (span, _read(*span))

    def mutated_inputs(self) -> list[int]:
        """The inputs whose bytes differ from what they held when the forward started."""
        return [i for i, ((lo, hi), first) in self.original.items() if _memcmp(lo, first.ctypes.data, hi - lo) != 0]

    def keep(self, values: Any) -> None:
        self.kept.append(values)

    def is_foreign(self, lo: int, hi: int) -> bool:
        foreign, unknown = self.map.query(lo, hi)
        return foreign or unknown > SMALL_BYTES

    def foreign_values(self, values: Any) -> bool:
        """Any of the bytes the tensors among `values` cover is foreign (their exact runs: the
        gaps of a strided view are not read)."""
        for t in iter_tensors(values):
            covered = exact_runs(t)
            unknown = 0
            for lo, hi in covered if covered is not None else spans(t):
                foreign, missing = self.map.query(lo, hi)
                unknown += missing
                if foreign or unknown > SMALL_BYTES:
                    return True
        return False

    # --- watched copies -----------------------------------------------------------------

    def _watch(self, lo: int, hi: int) -> None:
        if hi - lo > SMALL_BYTES:
            self.watched[(lo, hi)] = _read(lo, hi)

    def _changed(self) -> list[tuple[int, int]]:
        return [r for r, c in self.watched.items() if _memcmp(r[0], c.ctypes.data, r[1] - r[0]) != 0]

    def enter(self) -> None:
        """An op or a launch starts: what changed since the last one ended was written unseen."""
        if self.depth == 0:
            for lo, hi in self._changed():
                self.map.set(lo, hi, FOREIGN)
                self._watch(lo, hi)
        self.depth += 1

    def leave(self) -> None:
        self.depth -= 1

    # --- ops ----------------------------------------------------------------------------

    def after_op(self, name: str, args: Any, kwargs: Any, result: Any) -> None:
        """An op's results (and the tensors it wrote in place, which are among them) are foreign
        when any tensor it read is, or when they are fresh allocations. A fill reads no tensor,
        and a copy only its source: the old bytes they overwrite do not matter. A view shares
        its base's bytes and marks nothing."""
        self.keep((args, kwargs, result))
        if name in METADATA_OPS:
            return
        read_from = args[1:] if name in OVERWRITING_OPS and args else args
        tainted = self.foreign_values([read_from, kwargs]) or name in ALLOCATING_OPS
        in_place = name.endswith("_") or "out" in kwargs
        bases = {t.untyped_storage().data_ptr() for t in iter_tensors([args, kwargs]) if t.numel()}
        for t in iter_tensors(result):
            lo, hi = byte_span(t)
            if hi <= lo or (not in_place and t.untyped_storage().data_ptr() in bases):
                continue  # empty, or a view of an argument
            if tainted:
                self.map.set(lo, hi, FOREIGN)  # the whole span: more is never less safe
            else:
                self._mark_known(t)
            self._watch(lo, hi)

    def _mark_known(self, t: torch.Tensor) -> None:
        """Known: exactly the bytes the tensor's elements cover, never the gaps of a strided
        view (a column of a matrix numpy wrote would otherwise make the matrix known)."""
        for lo, hi in exact_runs(t) or []:
            self.map.set(lo, hi, KNOWN)

    # --- launches -----------------------------------------------------------------------

    def begin_launch(self) -> None:
        self.tainted, self.stored, self.unknown_loaded = False, [], 0

    def load(self, addresses: np.ndarray, itemsize: int) -> None:
        """A program loaded `itemsize`-byte elements at `addresses` (active lanes only). The
        launch is tainted by any foreign byte, or by more than SMALL_BYTES unknown ones over all
        its loads (a wide kernel loads a few hundred bytes at a time)."""
        if self.tainted or addresses.size == 0:
            return
        foreign, unknown = self.map.query(int(addresses.min()), int(addresses.max()) + itemsize)
        if not foreign and not unknown:
            return  # the whole span is known, so is every byte loaded from it
        for lo, hi in runs(addresses, itemsize):
            foreign, unknown = self.map.query(lo, hi)
            self.unknown_loaded += unknown
            self.tainted |= foreign or self.unknown_loaded > SMALL_BYTES

    def store(self, addresses: np.ndarray, values: np.ndarray) -> None:
        """A program is about to store `values` at `addresses` (active lanes only): the copies
        follow, so that at the launch's end memory must equal them."""
        if addresses.size == 0:
            return
        itemsize = values.dtype.itemsize
        stored = runs(addresses, itemsize)
        self.stored += stored
        for lo, hi in stored:
            if not any(a <= lo and hi <= b for a, b in self.watched):
                self._watch(lo, hi)  # its bytes now are overwritten below
        raw = np.ascontiguousarray(np.broadcast_to(values, addresses.shape)).reshape(-1).view(np.uint8)
        at = (addresses.reshape(-1).astype(np.int64)[:, None] + np.arange(itemsize)).reshape(-1)
        lo, hi = int(at.min()), int(at.max()) + 1
        for (a, b), copy in self.watched.items():
            if a < hi and lo < b:
                inside = (at >= a) & (at < b)
                copy[at[inside] - a] = raw[inside]

    def end_launch(self) -> bool:
        """The launch ended: memory gets back what the programs stored and nothing else wrote
        (True when something else had written it); what they stored is foreign when they loaded
        foreign bytes."""
        changed = self._changed()
        for lo, hi in changed:
            ctypes.memmove(lo, self.watched[(lo, hi)].ctypes.data, hi - lo)
        for lo, hi in self.stored:
            self.map.set(lo, hi, FOREIGN if self.tainted else KNOWN)
        self.tainted, self.stored = False, []
        return bool(changed)
