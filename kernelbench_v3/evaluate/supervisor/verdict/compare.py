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


def compare_case(
    name: str,
    group: str,
    out: Any,
    saved: dict[str, torch.Tensor],
    entry: dict[str, Any],
    mode: str,
    precision: str,
    calibrated: float | None,
) -> CaseVerdict:
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
    # In float64, with as few full-size temporaries as the same numbers allow: a 268 MB output
    # is 537 MB per float64 copy, and each fresh allocation is paid in page faults.
    o, r = out.double(), expected.double()
    if not all_finite(out):  # on the output itself: widening keeps NaN/Inf as they are
        bad = int((~torch.isfinite(out)).sum())
        v.failures["finite"] = f"{name}: {bad} NaN/Inf value(s) in the output"
        return v
    diff = o - r
    diff_norm = float(diff.norm())  # ||out - ref||, before diff becomes |out - ref| in place
    diff.abs_()
    v.max_abs = float(diff.max()) if diff.numel() else 0.0
    atol, rtol = tolerance_for(mode, precision, calibrated)
    if mode == "v3":
        bound = r.abs().mul_(rtol).add_(atol)  # atol + rtol*|ref|, rounded as that expression is
        ok = bool(diff.le(bound).all())
        del bound
        rule = f"allclose(atol={atol:g}, rtol={rtol:g})"
    else:
        scale = float(torch.linalg.vector_norm(r, math.inf)) if r.numel() else 0.0  # max|ref|
        ok = v.max_abs < atol + rtol * scale
        rule = f"max|out-ref| < {atol:g} + {rtol:g}*max|ref| ({mode})"
    del diff
    if not ok:
        v.failures[group] = f"{name}: max abs error {v.max_abs:.3g} (|out - ref| on this case's inputs) exceeds {rule}"
    ref_norm = float(r.norm())
    gross = GROSS_RELATIVE_ERROR.get(precision, GROSS_DEFAULT)
    if ok and ref_norm > 0 and diff_norm / ref_norm > gross:
        v.failures[group] = (
            f"{name}: relative error {diff_norm / ref_norm:.3g} exceeds {gross:g} "
            f"(||out-ref||/||ref||; within {rule} only because the outputs are small)"
        )
    residual = saved.get("residual64")
    if residual is not None:
        r64 = residual.to(torch.float64, copy=True).add_(r)  # ref + residual: the float64 reference (a copy)
        del r
        norm = float(r64.norm()) or 1.0
        v.rel_error = float(r64.sub_(o).norm()) / norm  # ||ref64 - out|| = ||out - ref64||
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
