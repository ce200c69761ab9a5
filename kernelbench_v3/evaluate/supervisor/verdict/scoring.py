"""The record's timing side of an evaluation: the baseline a request gets, and the figures that
fill the record once the solution has been timed.

`request_baseline` gets the reference's eager and compiled timings for a request (from the
baseline cache or a baseline child that imports only the verified problem file); `fill_timing`
copies the baseline and the solution's timing statistics into the record, takes the scored time (the supervisor's
window slope; the solution process's event figure is kept beside it as evidence), and derives the speedup and the roofline fraction.
A time the gate does not resolve in its mode (`timing.resolution`: without MPS, calls under
0.15 ms) is not a number either: the verdict stands, `sol_ms` (or, for a baseline under the floor,
`speedup`) reads null, and `timing_note` says `timing_unresolved` and why.
A solution the verdict rejected has no time: `sol_ms` and its spread read null and the raw
figures stay in `timing_details["unscored"]`, so no record shows a time that failed a check. The supervisor calls
both; nothing here talks to the solution process.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...vocab import GPU_TIMING_METHODS
from .. import mps
from ..record import Record
from ..request import DEFAULT_TIMEOUT_S, DEFAULT_TIMING_SECONDS, EvalRequest
from . import physics
from .fingerprint import device_name
from .timing.resolution import UNRESOLVED, unresolved
from .verdict import SolutionFacts

SMALL_KERNEL_MS = 0.05  # below this, separate evaluator runs of one solution disagree by over 1%
CPU_TIMING_NOTE = (
    "CPU timing through the Triton interpreter tests the machinery; it is no performance figure, "
    "so there is no speedup (with baseline=True the ratio is in timing_details.cpu_time_ratio)"
)


def problem_speed_of_light_ms(problem_id: str, gpu: str, precision: str) -> float | None:
    """The roofline time of the problem at default sizes on `gpu` (None when unknown)."""
    return physics.speed_of_light_ms(problem_id, gpu, precision)


def request_baseline(
    request: EvalRequest, problem: Any, source: str, sizes: dict[str, Any], cache_dir: Any, seconds: float
) -> dict[str, Any]:
    from ...catalog.materialize import write_module_file
    from .baseline import get_baseline

    module_path = write_module_file(source, stem=problem.name)  # verified content, not the checkout's file
    spec = {
        "device": request.device,
        "problem_path": str(module_path),
        "sizes": sizes,
        "seeds": list(request.seeds),
        "timing_seconds": seconds,
    }
    env = {"TRITON_INTERPRET": "1" if request.device == "cpu" else "0"}
    return get_baseline(
        spec,
        problem_sha256=hashlib.sha256(source.encode("utf-8")).hexdigest(),
        device_name=device_name(request.device),
        cache_dir=Path(cache_dir) if cache_dir is not None else None,
        timeout_s=request.timeout_s or DEFAULT_TIMEOUT_S,
        env=env,
        retry_failed=request.retry_failed_baseline,
    )


# Filling the baseline cache ahead of evaluations (`kbv3 baselines`): each problem's baseline got
# exactly as an evaluation of it would get it (the same cache key), so the evaluations that
# follow find it cached. Nothing of a solution runs here.
@dataclass(frozen=True)
class BaselineResult:
    problem_id: str
    entry: dict[str, Any]  # baseline.get_baseline's dict: baseline_ms, baseline_type, cached, error ...


def fill(
    problem_ids: Iterable[str],
    *,
    device: str = "cuda",
    problems_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    timing_seconds: float | None = None,
    retry_failed: bool = False,
) -> Iterator[BaselineResult]:
    """The baseline of each problem, from the cache or timed now and cached, in order."""
    from ...catalog.problem import default_problems_dir, get_problem

    root = Path(problems_dir) if problems_dir is not None else default_problems_dir()
    seconds = timing_seconds or DEFAULT_TIMING_SECONDS[device]
    for problem_id in problem_ids:
        problem = get_problem(problem_id, root)
        source = problem.path.read_bytes().decode("utf-8")
        sizes = dict(problem.reduced) if device == "cpu" and problem.reduced_sizes else {}
        request = EvalRequest(problem_id, problem.path, device=device, retry_failed_baseline=retry_failed)
        yield BaselineResult(problem_id, request_baseline(request, problem, source, sizes, cache_dir, seconds))


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


__all__ = ["BaselineResult", "fill", "fill_timing", "request_baseline", "problem_speed_of_light_ms"]
