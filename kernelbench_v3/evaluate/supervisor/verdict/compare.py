"""The correctness checks, each named, judged in the parent from the children's facts.

Owns the tolerance rules (`v3`: allclose with atol = rtol = 1e-2, the default, comparable with
the runs dataset; `published`: max|out-ref| < atol + rtol*max|ref| with the published
per-precision table; `strict`: the same form with a tolerance calibrated from the reference's own
error against float64), the precision check (error against float64 may not exceed what the
reference's own arithmetic - or, for fp32 problems, TF32-rounded inputs and weights, Triton's
default for `tl.dot` - would produce, times a margin), and the order in which checks are reported.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ...record import FAIL, PASS, SKIP

# Reported in this order; the first failure becomes Record.failed_check.
CHECK_ORDER: tuple[str, ...] = (
    "process",
    "source_scan",
    "import",
    "construct",
    "state_dict",
    "run",
    "global_state",
    "output_shape",
    "output_dtype",
    "finite",
    "input_mutation",
    "output_aliasing",
    "correctness",
    "stress",
    "other_shape",
    "recompute",
    "input_reuse",
    "precision",
    "custom_kernel",
    "library_ops",
    "main_work",
    "timed_outputs",
    "timing_gap",
    "impossible_time",
    "completeness",
)
V3_TOLERANCE = (1e-2, 1e-2)
PUBLISHED_TOLERANCES: dict[str, tuple[float, float]] = {
    "fp4": (0.5, 0.1),
    "fp8": (0.1, 0.05),
    "fp16": (1e-2, 1e-2),
    "bf16": (1e-2, 1e-2),
    "fp32": (1e-3, 1e-3),
}
PUBLISHED_DEFAULT = (0.05, 0.02)
# Norm-wise relative error ||out - ref|| / ||ref|| allowed in every case, by precision. The
# elementwise allclose rule alone is blind where outputs are small (a softmax over 16384 columns
# is below atol = 1e-2 everywhere, so any small numbers would pass); this bound is loose enough
# for every honest kernel of the precision and rejects outputs that are not the function.
GROSS_RELATIVE_ERROR: dict[str, float] = {
    "fp64": 1e-2,
    "fp32": 1e-2,
    "tf32": 1e-2,
    "fp16": 2e-2,
    "bf16": 3e-2,
    "fp8": 0.1,
    "fp4": 0.25,
}
GROSS_DEFAULT = 0.1
PRECISION_MARGIN = 3.0  # allowed multiple of the reference's own error vs float64
TF32_MARGIN = 2.0  # allowed multiple of the TF32-truncated emulation's error (bf16 errs ~3x it)
STRICT_MARGIN = 4.0
# The least relative error (vs float64) an fp32 output is always allowed: another summation order
# or another exp/erf stays far below it, while rounding inputs or math to fp16 (2^-11) or bf16
# (2^-8) lands well above it.
FP32_PRECISION_FLOOR = 1e-5


def all_finite(t: torch.Tensor) -> bool:
    """`torch.isfinite(t).all()`, in one pass without its full-size temporaries: the least and
    the greatest value (`aminmax` propagates NaN, and an infinity is one of the two). On 268 MB
    that is an order of magnitude faster. Non-floating tensors are finite."""
    if not t.is_floating_point() or t.numel() == 0:
        return True
    try:
        lo, hi = torch.aminmax(t)
    except (RuntimeError, NotImplementedError):  # a dtype without aminmax (float8)
        return bool(torch.isfinite(t).all())
    return bool(torch.isfinite(lo)) and bool(torch.isfinite(hi))


def tolerance_for(mode: str, precision: str, calibrated: float | None = None) -> tuple[float, float]:
    if mode == "v3":
        return V3_TOLERANCE
    if mode == "strict" and calibrated is not None:
        return calibrated, calibrated
    return PUBLISHED_TOLERANCES.get(precision, PUBLISHED_DEFAULT)


def calibrate_strict(ref_cases: dict[str, Any]) -> float | None:
    """The strict tolerance (relative to max|ref|): a margin over the larger of the
    reference's and the TF32 emulation's own max error against float64, never below a few ulps."""
    worst: float | None = None
    for entry in ref_cases.values():
        info = entry.get("float64") or {}
        if "ref_error" not in info:
            continue
        eps = torch.finfo(getattr(torch, entry["dtype"].replace("torch.", ""))).eps
        errs = [info["ref_error"]["max_scaled"], (info.get("tf32_error") or {}).get("max_scaled", 0.0), 2 * eps]
        value = STRICT_MARGIN * max(e for e in errs if e is not None)
        worst = value if worst is None else max(worst, value)
    return worst


@dataclass
class CaseVerdict:
    """The comparison of one case's output with the reference's."""

    name: str
    group: str
    failures: dict[str, str] = field(default_factory=dict)  # check name -> reason
    max_abs: float | None = None
    rel_error: float | None = None
    error_reference: str = ""
    precision_ok: bool | None = None


# Elements compared at a time: the float64 temporaries of a piece (output, reference, their
# difference, the bound) stay near 0.5 GB whatever the output's size, so a 4 GB output is compared
# on the GPU beside a solution's allocations, and on the CPU without gigabytes of page faults.
COMPARE_PIECE = 1 << 24


@dataclass
class _Sums:
    """What a comparison needs of the whole output, gathered piece by piece."""

    diff_sq: float = 0.0  # ||out - ref||^2
    ref_sq: float = 0.0  # ||ref||^2
    max_abs: float = 0.0  # max|out - ref|
    ref_max: float = 0.0  # max|ref|
    within: bool = True  # every element within atol + rtol*|ref|
    ref64_sq: float = 0.0  # ||ref64||^2 (ref + residual)
    res_sq: float = 0.0  # ||ref64 - out||^2


def _widened(t: torch.Tensor, on: Any) -> torch.Tensor:
    """A float64 copy of `t` on `on`. Moved first, widened there: torch widens a CPU-GPU copy on
    the CPU, which would move twice the bytes through a pageable buffer."""
    return t.to(on).to(torch.float64, copy=True)


def _nan_max(a: float, b: float) -> float:
    """max(a, b), NaN if either is (Python's max keeps whichever NaN comes first, or neither)."""
    return math.nan if a != a or b != b else max(a, b)


def _dot(x: torch.Tensor) -> float:
    return float(torch.dot(x, x)) if x.numel() else 0.0


def _sums(
    out: torch.Tensor, expected: torch.Tensor, residual: torch.Tensor | None, on: Any, rtol: float, atol: float
) -> _Sums | None:
    """One pass over the flattened tensors, each piece widened to float64 on `on`; None as soon
    as a piece of `out` holds a NaN or an infinity (widening keeps them)."""
    flat_out, flat_ref = out.reshape(-1), expected.reshape(-1)
    flat_res = residual.reshape(-1) if residual is not None else None
    s = _Sums()
    for i in range(0, flat_out.numel(), COMPARE_PIECE):
        piece = slice(i, i + COMPARE_PIECE)
        o = _widened(flat_out[piece], on)
        if not all_finite(o):
            return None
        r = _widened(flat_ref[piece], on)
        diff = o - r
        s.diff_sq += _dot(diff)
        diff.abs_()
        s.max_abs = _nan_max(s.max_abs, float(diff.max()))  # a NaN in the reference stays a NaN, as whole
        bound = r.abs()
        s.ref_max = _nan_max(s.ref_max, float(bound.max()))
        s.within = s.within and bool(diff.le(bound.mul_(rtol).add_(atol)).all())  # rounded as atol + rtol*|ref|
        del diff, bound
        s.ref_sq += _dot(r)
        if flat_res is not None:
            ref64 = _widened(flat_res[piece], on).add_(r)  # ref + residual: the float64 reference
            s.ref64_sq += _dot(ref64)
            s.res_sq += _dot(ref64.sub_(o))  # ref64 - out
    return s


def _non_finite(out: torch.Tensor, on: Any) -> int:
    """How many NaN/Inf values `out` holds, counted piece by piece on `on`."""
    flat = out.reshape(-1)
    return sum(
        int((~torch.isfinite(flat[i : i + COMPARE_PIECE].to(on))).sum()) for i in range(0, flat.numel(), COMPARE_PIECE)
    )


def compare_case(
    name: str,
    group: str,
    out: Any,
    saved: dict[str, torch.Tensor],
    entry: dict[str, Any],
    mode: str,
    precision: str,
    calibrated: float | None,
    on: Any = None,
) -> CaseVerdict:
    """`out` against the reference's saved tensors, computed in float64 on `on` (default: where
    `out` is). On a GPU a piece that does not fit is compared on the CPU instead."""
    v = CaseVerdict(name, group)
    expected = saved["expected"]
    if not isinstance(out, torch.Tensor):
        v.failures["output_shape"] = f"{name}: the solution returned {type(out).__name__}, not a tensor"
        return v
    if tuple(out.shape) != tuple(expected.shape):
        v.failures["output_shape"] = f"{name}: shape {tuple(out.shape)}, expected {tuple(expected.shape)}"
        return v
    if out.dtype != expected.dtype:
        v.failures["output_dtype"] = f"{name}: dtype {out.dtype}, expected {expected.dtype}"
    on = torch.device(on) if on is not None else out.device
    atol, rtol = tolerance_for(mode, precision, calibrated)
    residual = saved.get("residual64")
    moved = on != out.device
    try:
        sums = _sums(out, expected, residual, on, rtol, atol)
    except torch.cuda.OutOfMemoryError:
        if on.type != "cuda":
            raise
        torch.cuda.empty_cache()
        on = torch.device("cpu")
        sums = _sums(out, expected, residual, on, rtol, atol)
    if sums is None:
        v.failures["finite"] = f"{name}: {_non_finite(out, on)} NaN/Inf value(s) in the output"
    if moved and on.type == "cuda":  # give the solution process back what the pieces took
        torch.cuda.empty_cache()
    if sums is None:
        return v
    v.max_abs = sums.max_abs
    diff_norm, ref_norm = math.sqrt(sums.diff_sq), math.sqrt(sums.ref_sq)
    if mode == "v3":
        ok = sums.within
        rule = f"allclose(atol={atol:g}, rtol={rtol:g})"
    else:
        ok = v.max_abs < atol + rtol * sums.ref_max
        rule = f"max|out-ref| < {atol:g} + {rtol:g}*max|ref| ({mode})"
    if not ok:
        v.failures[group] = f"{name}: max abs error {v.max_abs:.3g} (|out - ref| on this case's inputs) exceeds {rule}"
    gross = GROSS_RELATIVE_ERROR.get(precision, GROSS_DEFAULT)
    if ok and ref_norm > 0 and diff_norm / ref_norm > gross:
        v.failures[group] = (
            f"{name}: relative error {diff_norm / ref_norm:.3g} exceeds {gross:g} "
            f"(||out-ref||/||ref||; within {rule} only because the outputs are small)"
        )
    if residual is not None:
        v.rel_error = math.sqrt(sums.res_sq) / (math.sqrt(sums.ref64_sq) or 1.0)  # ||out - ref64|| / ||ref64||
        v.error_reference = "float64"
        info = entry.get("float64") or {}
        bound = _precision_bound(info, expected.dtype)
        v.precision_ok = v.rel_error <= bound
        if not v.precision_ok:
            v.failures["precision"] = (
                f"{name}: relative error {v.rel_error:.3g} vs float64 exceeds {bound:.3g} "
                f"(the larger of {PRECISION_MARGIN:g}x the reference's own error"
                f"{f' and {TF32_MARGIN:g}x that of TF32-truncated inputs and weights' if 'tf32_error' in info else ''}): "
                "computed at lower precision than the problem's"
            )
    else:
        v.rel_error = diff_norm / (ref_norm or 1.0)
        v.error_reference = "reference dtype"
    return v


def _precision_bound(info: dict[str, Any], dtype: torch.dtype) -> float:
    eps = torch.finfo(dtype).eps if dtype.is_floating_point else 0.0
    floor = FP32_PRECISION_FLOOR if dtype == torch.float32 else eps
    bounds = [floor]
    if info.get("ref_error", {}).get("rel") is not None:
        bounds.append(PRECISION_MARGIN * info["ref_error"]["rel"])
    if (info.get("tf32_error") or {}).get("rel") is not None:
        bounds.append(TF32_MARGIN * info["tf32_error"]["rel"])
    return max(bounds)


def ordered_outcomes(outcomes: dict[str, tuple[str, str]]) -> list[tuple[str, str, str]]:
    """(name, outcome, detail) in CHECK_ORDER, then any others."""
    names = [n for n in CHECK_ORDER if n in outcomes] + [n for n in outcomes if n not in CHECK_ORDER]
    return [(n, *outcomes[n]) for n in names]


def merge(outcomes: dict[str, tuple[str, str]], name: str, failed: bool, detail: str = "") -> None:
    """Record a pass, or a failure (a failure is never overwritten by a later pass)."""
    if name in outcomes and outcomes[name][0] == FAIL:
        return
    outcomes[name] = (FAIL if failed else PASS, detail)


class Verifier:
    """Judges a timed call's output exactly as a correctness case: `expected_for(inputs, float64)`
    gives the reference's saved tensors ("expected", and "residual64" when asked and available).
    The timing room decides which calls (`timing.judging`); this is how each is judged."""

    def __init__(
        self,
        expected_for: Callable[[list[Any], bool], dict[str, torch.Tensor]],
        entry: dict[str, Any],
        tolerance: str,
        precision: str,
    ):
        self.expected_for, self.entry, self.tolerance, self.precision = expected_for, entry, tolerance, precision

    def check(self, label: str, inputs: list[Any], output: torch.Tensor, float64: bool) -> str:
        """'' when the output passes every rule a case gets, else why not."""
        saved = self.expected_for(inputs, float64)
        verdict = compare_case(label, "timed_outputs", output, saved, self.entry, self.tolerance, self.precision, None)
        return "; ".join(verdict.failures.values())


__all__ = [
    "CHECK_ORDER",
    "FAIL",
    "PASS",
    "SKIP",
    "CaseVerdict",
    "Verifier",
    "all_finite",
    "calibrate_strict",
    "compare_case",
    "merge",
    "ordered_outcomes",
    "tolerance_for",
]
