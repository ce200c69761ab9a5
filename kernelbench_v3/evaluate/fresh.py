"""Fresh inputs for the timing loop, and the verdict on solutions that are faster on repeats.

The timed input sets rotate, so each repeats many times; a solution that caches its output
under a key made from the inputs' *values* (a hash, a checksum, sampled elements) returns the
stored answer for every repeat and is timed far below the cost of the work. The recompute
check cannot see such a cache (new values miss it). So the timing loop interleaves calls on
inputs never seen before: before each fresh call, and outside the timed region, `FreshInputs`
writes a new blend of a rotating set and a partner set into one buffer set, with a new weight
each time (`cases.blend_into`: every floating value changes, the structure all sets share is
kept). An honest solution costs the same on both; a content cache is fast only on repeats.

`reuse_verdict` compares the two timings: the solution fails the `input_reuse` check when its
median on fresh inputs exceeds `REUSE_RATIO` x its median on repeated inputs and the two
distributions do not overlap (fresh p10 above repeated p90), so noise alone cannot trip it.
The fresh-input median is the reported solution time either way. The very last fresh call uses
the `timed_fresh` case's inputs (the local driver `cuda_timing.time_cuda`; in an evaluation the supervisor
verifies randomly chosen timed outputs instead, `clock`), so what
was timed on fresh inputs is checked too (`timed_outputs`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from .cases import FRESH_CHECK_WEIGHT, blend_into


def quantile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile of sorted values, interpolated linearly (timing's p10/p90 use it too)."""
    pos = q * (len(ordered) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


REUSE_RATIO = 1.5
FRESH_BUFFER_BYTES = 256 << 20  # at most this much memory for the rotating fresh buffer sets
MAX_FRESH_BUFFERS = 8
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def buffer_count(inputs: Sequence[Any]) -> int:
    """How many fresh buffer sets to rotate: up to MAX_FRESH_BUFFERS within FRESH_BUFFER_BYTES."""
    size = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
    return max(1, min(MAX_FRESH_BUFFERS, FRESH_BUFFER_BYTES // max(size, 1)))


class FreshInputs:
    """Never-repeating input sets: call `next()` outside the timed region before each fresh call;
    `final` is the checked fresh set (used once, last) and `final_output` its timed output."""

    def __init__(
        self, rotating: Sequence[Sequence[Any]], partner: Sequence[Any], final: Sequence[Any], buffers: int = 1
    ):
        if not rotating:
            raise ValueError("FreshInputs needs at least one rotating input set")
        if buffers < 1:
            raise ValueError(f"FreshInputs needs at least one buffer set, got {buffers}")
        self.rotating = [list(s) for s in rotating]
        self.partner = list(partner)
        self.final = list(final)
        self.final_output: Any = None
        # Several buffer sets in turn: on a GPU, where one buffer happens to sit in memory
        # changes a small kernel's time by a few percent; rotating averages that out within a run.
        self.buffers = [
            [x.clone() if isinstance(x, torch.Tensor) else x for x in self.rotating[0]] for _ in range(buffers)
        ]
        self.count = 0

    def weight(self, t: int) -> float:
        """Weights spread over [0.2, 0.8] without repeating; 0.5 (the checked set's) never occurs."""
        w = 0.2 + 0.6 * ((t + 1) * _GOLDEN % 1.0)
        return w if w != FRESH_CHECK_WEIGHT else w + 1e-3

    def next(self) -> list[Any]:
        t = self.count
        self.count += 1
        return self.write(t, self.weight(t))

    def new_set(self, t: int, w: float) -> list[Any]:
        """Fresh set number `t` in new tensors of its own (for calls back to back)."""
        base = self.rotating[t % len(self.rotating)]
        return blend_into([x.clone() if isinstance(x, torch.Tensor) else x for x in base], base, self.partner, w)

    def write(self, t: int, w: float) -> list[Any]:
        """Fresh set number `t`: w * rotating[t % n] + (1 - w) * partner, in buffer set t % buffers."""
        return blend_into(self.buffers[t % len(self.buffers)], self.rotating[t % len(self.rotating)], self.partner, w)


def reuse_verdict(
    fresh_ms: Sequence[float], repeated_ms: Sequence[float], ratio: float = REUSE_RATIO
) -> dict[str, Any]:
    """The figures of fresh vs repeated inputs, and whether the solution is markedly faster on
    repeated ones (ratio of medians above `ratio` and fresh p10 above repeated p90)."""
    fresh, repeated = sorted(fresh_ms), sorted(repeated_ms)
    if not fresh or not repeated:
        return {"faster_on_repeated_inputs": False, "note": "too few samples to compare"}
    f_med, r_med = quantile(fresh, 0.5), quantile(repeated, 0.5)
    f_p10, r_p90 = quantile(fresh, 0.10), quantile(repeated, 0.90)
    faster = f_med > ratio * r_med and f_p10 > r_p90
    return {
        "fresh_median_ms": f_med,
        "repeated_median_ms": r_med,
        "fresh_over_repeated": f_med / r_med if r_med > 0 else None,
        "fresh_p10_ms": f_p10,
        "repeated_p90_ms": r_p90,
        "fresh_reps": len(fresh),
        "repeated_reps": len(repeated),
        "rule": f"fresh median > {ratio:g} x repeated median and fresh p10 > repeated p90",
        "faster_on_repeated_inputs": faster,
    }
