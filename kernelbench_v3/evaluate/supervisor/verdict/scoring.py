"""The record's timing side of an evaluation: the figures that fill the record once the solution
has been timed and judged.

`fill_timing` copies the baseline (`reference.request_baseline`) and the solution's timing
statistics into the record, takes the scored time (the supervisor's
window slope; the solution process's event figure is kept beside it as evidence), and derives the speedup and the roofline fraction.
A time the gate does not resolve in its mode (`timing.resolution`: without MPS, calls under
0.15 ms) is not a number either: the verdict stands, `sol_ms` (or, for a baseline under the floor,
`speedup`) reads null, and `timing_note` says `timing_unresolved` and why.
A solution the verdict rejected has no time: `sol_ms` and its spread read null and the raw
figures stay in `timing_details["unscored"]`, so no record shows a time that failed a check. The supervisor calls
both; nothing here talks to the solution process.
"""

from __future__ import annotations

import math
from typing import Any

from ....vocab import GPU_TIMING_METHODS
from ... import mps
from ...record import Record
from ...request import EvalRequest
from ..timing import UNRESOLVED, unresolved
from . import physics
from .judgement import SolutionFacts

SMALL_KERNEL_MS = 0.05  # below this, separate evaluator runs of one solution disagree by over 1%
CPU_TIMING_NOTE = (
    "CPU timing through the Triton interpreter tests the machinery; it is no performance figure, "
    "so there is no speedup (with baseline=True the ratio is in timing_details.cpu_time_ratio)"
)


def problem_speed_of_light_ms(problem_id: str, gpu: str, precision: str) -> float | None:
    """The roofline time of the problem at default sizes on `gpu` (None when unknown)."""
    return physics.speed_of_light_ms(problem_id, gpu, precision)


def fill_timing(rec: Record, facts: SolutionFacts, base: dict[str, Any], request: EvalRequest) -> None:
    if base:
        rec.eager_ms, rec.compiled_ms = base.get("eager_ms"), base.get("compiled_ms")
        rec.baseline_ms, rec.baseline_type = base.get("baseline_ms"), base.get("baseline_type")
        rec.baseline_cached = base.get("cached")
        rec.ref_ms = rec.baseline_ms
        if base.get("error"):
            rec.baseline_error = base["error"] + (
                " (cached failure; retry_failed_baseline re-times it)" if base.get("cached") else ""
            )
            rec.timing_flags.append("baseline_failed")
            rec.timing_details["baseline_error"] = rec.baseline_error
        if base.get("compile_error"):
            rec.timing_details["compile_error"] = base["compile_error"]
    timing = facts.timing
    stats = timing.stats if timing is not None else None
    rec.timing_skipped = facts.timing_skipped
    if stats:
        rec.timing_method = stats["method"]
        figures = {"sol_ms": stats["median_ms"], "sol_p10_ms": stats["p10_ms"], "sol_p90_ms": stats["p90_ms"]}
        figures["sol_cv"] = stats["ci_rel"]
        rec.sol_reps = stats["reps"]
        rec.timing_flags.extend(timing.flags)
        rec.timing_details.update(timing.details)
        rec.event_ms = timing.details.get("own_ms_per_call")
        if rec.correct and stats.get("unresolved"):  # correct, but no figure the gate resolves
            rec.timing_note = stats["unresolved"]
            rec.timing_details["unscored"] = {**figures, "reason": UNRESOLVED}
        elif rec.correct:
            for name, value in figures.items():
                setattr(rec, name, value)
        else:  # a rejected solution has no time: the figures stay as evidence, under the check that failed
            rec.timing_details["unscored"] = {**figures, "failed_check": rec.failed_check or rec.status}
    if rec.timing_method:
        rec.timing_meaningful = rec.timing_method in GPU_TIMING_METHODS
        if not rec.timing_meaningful:
            rec.timing_note = CPU_TIMING_NOTE
    baseline_unresolved = ""
    if rec.timing_meaningful and rec.baseline_ms and request.device == "cuda":
        baseline_unresolved = unresolved(rec.baseline_ms * 1e-3, mps.in_use(), "the baseline")
    if rec.correct and rec.sol_ms and rec.baseline_ms and baseline_unresolved:
        if UNRESOLVED not in rec.timing_flags:
            rec.timing_flags.append(UNRESOLVED)
        rec.timing_note = baseline_unresolved
        rec.timing_details["speedup_unresolved"] = baseline_unresolved
    elif rec.correct and rec.sol_ms and rec.baseline_ms:
        if rec.timing_meaningful:
            rec.speedup = rec.baseline_ms / rec.sol_ms
        else:
            rec.timing_details["cpu_time_ratio"] = rec.baseline_ms / rec.sol_ms
    if rec.timing_meaningful and rec.sol_ms and rec.sol_ms < SMALL_KERNEL_MS:
        rec.warnings.append(
            f"small_kernel_timing: {rec.sol_ms * 1e3:.1f} us; separate evaluator runs of kernels this small "
            "can differ by more than 1% (docs/timing.md), so compare such speedups with a few percent of margin"
        )
    if not rec.sizes:  # the roofline figures are for the default shapes
        sol = problem_speed_of_light_ms(rec.problem_id, request.gpu, rec.precision_used)
        if sol is not None:
            rec.sol_roofline_ms = sol
            if rec.correct and rec.sol_ms and request.device == "cuda" and math.isfinite(rec.sol_ms):
                rec.sol_fraction = sol / rec.sol_ms


__all__ = ["fill_timing", "problem_speed_of_light_ms"]
