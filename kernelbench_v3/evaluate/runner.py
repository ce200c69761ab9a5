"""Orchestrating one evaluation in the parent: reference child, baseline, candidate child, verdict.

The parent never imports the solution. Order: (1) the reference child writes expected outputs
and re-randomized state dicts; the parent loads the expected outputs into memory and deletes
their files, so the candidate cannot read them; (2) the baseline (cached); (3) the candidate
child runs the solution and reports facts and outputs; (4) the parent judges (see `checks`),
then fills timing, speedup, speed-of-light fraction and the fingerprint into the Record.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import torch

from . import cases as C
from . import checks as K
from .fingerprint import device_name, software
from .record import FAIL, SKIP, Record
from .request import EvalRequest
from .timing import ESCAPED_STREAM

# Below this solution time, separate evaluator runs of the same solution disagree by more than
# the 1% the timing aims for (1.3-5.1% at 12-15 us on an H200; 0.24% at 0.068 ms).
SMALL_KERNEL_MS = 0.05

REDUCED_NOTE = "no sizes given on CPU: used the problem's REDUCED_SIZES (default shapes are GPU-sized)"


def _child_env(device: str) -> dict[str, str]:
    env = {"TRITON_INTERPRET": "1"} if device == "cpu" else {}
    if device == "cuda":
        env["TRITON_INTERPRET"] = "0"
    return env


def speed_of_light_ms(problem_id: str, gpu: str, precision: str) -> float | None:
    """The roofline time of the problem at default sizes on `gpu`, when the roofline module
    knows both (None otherwise)."""
    try:
        from .. import gpus, roofline
    except ImportError:
        return None
    try:
        flops, nbytes = roofline.DEFAULT_ROOFLINE[problem_id]
        return float(roofline.speed_of_light_ms(flops, nbytes, gpus.get_gpu(gpu), precision))
    except Exception:
        return None


def run_evaluation(request: EvalRequest, *, problems_dir=None, cache_dir=None) -> Record:
    from ..catalog import default_problems_dir, get_problem

    started = time.monotonic()
    root = Path(problems_dir) if problems_dir is not None else default_problems_dir()
    problem = get_problem(request.problem_id, root)
    solution = Path(request.solution_path).resolve()
    if not solution.is_file():
        raise FileNotFoundError(f"solution file {solution} does not exist")
    rec = Record(
        model=request.model, gpu=request.gpu.upper(), level=problem.level, problem=problem.file_name,
        op_type=problem.op_type, problem_id=problem.problem_id, problem_sha256=problem.sha256,
        solution_path=str(solution), solution_sha256=hashlib.sha256(solution.read_bytes()).hexdigest(),
        device=request.device, seeds=list(request.seeds), tolerance_mode=request.tolerance,
        custom_kernel_required=request.require_custom_kernel,
        started_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    )
    rec.fingerprint = software()
    sizes = request.size_overrides
    if request.device == "cpu" and not sizes and problem.reduced_sizes:
        sizes, rec.sizes_note = problem.reduced, REDUCED_NOTE
    rec.sizes = dict(sizes)
    try:
        if request.device == "cpu" and problem.cpu_unsupported:
            return rec.fail("error", f"{problem.problem_id} cannot run on CPU: {problem.cpu_unsupported}")
        with tempfile.TemporaryDirectory(prefix="kbv3-eval-") as tmp:
            _evaluate_in(Path(tmp), request, problem, root, solution, sizes, rec, cache_dir)
        return rec
    finally:
        rec.duration_s = round(time.monotonic() - started, 3)


def _evaluate_in(work, request, problem, root, solution, sizes, rec, cache_dir) -> None:
    env = _child_env(request.device)
    ref_dir, cand_dir = work / "reference", work / "candidate"
    ref_dir.mkdir(mode=0o700)
    cand_dir.mkdir(mode=0o700)
    plan = C.plan_cases(request.seeds, request.other_shape, timed=request.time_solution)
    spec = {
        "device": request.device, "problem_path": str(problem.path), "problems_root": str(root),
        "sizes": sizes, "cases": [c.to_dict() for c in plan],
    }
    with _phase(rec, "reference"):
        ref = _run("reference", ref_dir, spec, request, env)
    if ref.result is None or not ref.result.get("ok"):
        why = ref.reason or (ref.result or {}).get("error", "")
        rec.log_tail = ref.log_tail[-request.max_log_bytes:]
        rec.fail("error", f"the reference could not be evaluated: {why}")
        return
    reference = ref.result
    rec.precision_used = reference["precision"]
    rec.fingerprint.update(reference.get("device_info", {}))
    # Expected outputs stay in this process only: the candidate runs after their files are gone.
    expected = {name: torch.load(ref_dir / f"expected_{name}.pt", weights_only=True) for name in reference["case_order"]}
    for name in reference["shapes"]:
        shutil.copy(ref_dir / f"state_{name}.pt", cand_dir / f"state_{name}.pt")
    shutil.rmtree(ref_dir)
    if not reference["cases"][f"seed{request.seeds[0]}"]["finite"]:
        rec.fail("error", "the reference output has NaN/Inf at these sizes")
        return

    timing_seconds = request.timing_seconds or (4.0 if request.device == "cpu" else 15.0)
    base: dict[str, Any] = {}
    if request.time_solution and request.baseline:
        with _phase(rec, "baseline"):
            base = _baseline(request, problem, sizes, env, cache_dir, timing_seconds)
    cand_spec = {
        "device": request.device, "problem_path": str(problem.path), "solution_path": str(solution),
        "reference": {k: reference[k] for k in ("cases", "shapes", "case_order")},
        "time_solution": request.time_solution, "timing_seconds": timing_seconds,
    }
    nonce = secrets.token_hex(16)
    with _phase(rec, "candidate"):
        cand = _run("candidate", cand_dir, cand_spec, request, env, nonce=nonce)
    rec.log_tail = cand.log_tail[-request.max_log_bytes:]
    if cand.result is None:
        rec.fail("failed", f"the solution's process failed: {cand.reason}", check="process")
        return
    if not cand.result.get("ok"):
        rec.fail("error", f"evaluator error in the candidate process: {cand.result.get('error')}")
        return
    _judge(rec, cand.result, reference, expected, cand_dir, request)
    _fill_timing(rec, cand.result, base, request)


@contextmanager
def _phase(rec: Record, name: str) -> Iterator[None]:
    """Record in `rec.phase_s[name]` how many seconds the block took."""
    started = time.monotonic()
    try:
        yield
    finally:
        rec.phase_s[name] = round(time.monotonic() - started, 3)


def _run(role, workdir, spec, request, env, nonce=None):
    from .isolate import run_child

    return run_child(
        role, workdir, spec, timeout_s=request.timeout_s, env=env, nonce=nonce, max_log_bytes=request.max_log_bytes
    )


def _baseline(request, problem, sizes, env, cache_dir, seconds) -> dict[str, Any]:
    from .baseline import get_baseline

    spec = {
        "device": request.device, "problem_path": str(problem.path), "sizes": sizes,
        "seeds": list(request.seeds), "timing_seconds": seconds,
    }
    return get_baseline(
        spec, problem_sha256=problem.sha256, device_name=device_name(request.device),
        cache_dir=Path(cache_dir) if cache_dir is not None else None, timeout_s=request.timeout_s, env=env,
        retry_failed=request.retry_failed_baseline,
    )


def _judge(rec: Record, facts: dict[str, Any], reference: dict[str, Any], expected, cand_dir: Path, request) -> None:
    out: dict[str, tuple[str, str]] = {}
    stage = facts.get("failed_stage")
    ran = [n for n in reference["case_order"] if n in facts.get("cases", {})]
    rec.solution_class = facts.get("class", "")
    rec.compiled = bool(ran) and stage not in ("import", "construct")
    if stage in ("import", "construct", "run"):
        K.merge(out, stage, True, (facts.get("error") or "")[:2000])
    for name, report in (facts.get("state_dict") or {}).items():
        problems = [f"{k}: {', '.join(map(str, v))}" for k, v in report.items() if v]
        K.merge(out, "state_dict", bool(problems), f"{name} shape: " + "; ".join(problems) if problems else "")
    tampered = list(facts.get("tampered_at_import") or []) + list(facts.get("tampered") or [])
    flag_changes = sorted({f for n in ran for f in facts["cases"][n].get("flag_changes", [])})
    bad_state = tampered + [f"torch flag changed during forward: {f}" for f in flag_changes]
    if "import" not in out and "class" in facts:
        note = f" (import changed and was reset: {facts.get('import_flag_changes')})" if facts.get("import_flag_changes") else ""
        K.merge(out, "global_state", bool(bad_state), ("replaced/changed: " + ", ".join(bad_state[:20]) if bad_state else "") + note)

    calibrated = K.calibrate_strict(reference["cases"])
    atol, rtol = K.tolerance_for(request.tolerance, rec.precision_used, calibrated)
    rec.atol, rec.rtol = atol, rtol
    worst_abs, worst_rel, err_ref = None, None, ""
    for name in ran:
        fact = facts["cases"][name]
        entry = reference["cases"][name]
        group = entry["case"]["group"]
        K.merge(out, "input_mutation", bool(fact.get("mutated_inputs")),
                f"{name}: input(s) {fact['mutated_inputs']} were modified" if fact.get("mutated_inputs") else "")
        if fact.get("output_type") != "Tensor":
            K.merge(out, "output_shape", True, f"{name}: the solution returned {fact.get('output_type')}, not a tensor")
            continue
        K.merge(out, "output_aliasing", bool(fact.get("aliases")),
                f"{name}: the output shares memory with {', '.join(fact['aliases'])}" if fact.get("aliases") else "")
        if group in (C.STRESS, C.INPUT_REUSE) and not entry["finite"]:
            out.setdefault(group, (SKIP, f"{name}: the reference itself overflows"))
            continue
        got = torch.load(cand_dir / f"out_{name}.pt", weights_only=True)["output"]
        verdict = K.compare_case(name, group, got, expected[name], entry, request.tolerance, rec.precision_used, calibrated)
        for check in ("output_shape", "output_dtype", "finite", group, "precision"):
            if check in verdict.failures:
                K.merge(out, check, True, verdict.failures[check])
            elif check != "precision" or verdict.precision_ok is not None:
                K.merge(out, check, False)
        if verdict.max_abs is not None:
            worst_abs = max(worst_abs or 0.0, verdict.max_abs)
        if verdict.rel_error is not None and (verdict.error_reference == "float64" or err_ref != "float64"):
            if verdict.error_reference != err_ref:
                worst_rel, err_ref = None, verdict.error_reference
            worst_rel = max(worst_rel or 0.0, verdict.rel_error)
    rec.max_abs_error, rec.rel_error, rec.error_reference = worst_abs, worst_rel, err_ref
    if "other_shape" not in out and not any(reference["cases"][n]["case"]["group"] == C.OTHER_SHAPE for n in ran):
        out["other_shape"] = (SKIP, "; ".join(reference.get("notes", [])) or "not requested")
    if "precision" not in out:
        out["precision"] = (SKIP, "no float64 reference for this problem")
    _kernel_check(out, facts, rec, request, reference.get("kernel_names") or [])
    timing = facts.get("timing") or {}
    if timing:
        bad = timing.get("recheck_mismatched_sets") or []
        K.merge(out, "timed_outputs", bool(bad), f"timed outputs of input set(s) {bad} differ from the untimed ones" if bad else "")
        _judge_fresh_timing(out, timing, reference, expected, cand_dir, request, rec.precision_used, calibrated)
    for name, outcome, detail in K.ordered_outcomes(out):
        rec.check(name, outcome, detail)
    failed = [n for n, (o, _) in out.items() if o == FAIL]
    if not failed and stage is None and ran:
        rec.status, rec.correct = "correct", True
    else:
        rec.status = "failed" if not rec.compiled else "incorrect"
        rec.correct = False
        rec.error = rec.check_details.get(rec.failed_check or "", facts.get("error") or "incomplete evaluation")[:2000]


def _judge_fresh_timing(out, timing, reference, expected, cand_dir: Path, request, precision, calibrated) -> None:
    """`input_reuse` from the fresh-vs-repeated timing; `timed_outputs` also covers the output
    timed on the checked fresh set (compared with the reference like any case)."""
    reuse = (timing.get("stats") or {}).get("details", {}).get("input_reuse")
    if reuse:
        K.merge(out, "input_reuse", reuse["faster_on_repeated_inputs"], (
            f"{reuse['fresh_over_repeated']:.3g}x faster on repeated input sets than on fresh ones "
            f"(median {reuse['repeated_median_ms']:.4g} vs {reuse['fresh_median_ms']:.4g} ms; p90 "
            f"{reuse['repeated_p90_ms']:.4g} < fresh p10 {reuse['fresh_p10_ms']:.4g} ms): outputs cached by input content"
        ) if reuse["faster_on_repeated_inputs"] else "")
    name = next((n for n in reference["case_order"] if reference["cases"][n]["case"]["group"] == C.TIMED_FRESH), None)
    if name is None or "fresh_output_type" not in timing:
        return
    path = cand_dir / "out_timed_fresh.pt"
    got = torch.load(path, weights_only=True)["output"] if path.exists() else None
    verdict = K.compare_case(name, "timed_outputs", got, expected[name], reference["cases"][name], request.tolerance, precision, calibrated)
    bad = "; ".join(verdict.failures.values())
    K.merge(out, "timed_outputs", bool(bad), f"output timed on fresh inputs is wrong: {bad}" if bad else "")


LOW_CUSTOM_TIME = 0.10  # below this share of device time in custom kernels, the record warns


def _kernel_check(out, facts, rec: Record, request, reference_names: list[str]) -> None:
    from .kernels import custom_kernels, custom_time_fraction

    launched = list(facts.get("triton_kernels") or [])
    cuda_names = facts.get("cuda_kernels") or []
    rec.triton_launches = facts.get("triton_launches")
    rec.reference_kernel_names = list(reference_names)
    rec.kernel_names = list(dict.fromkeys(launched + cuda_names))
    custom = custom_kernels(rec.kernel_names, reference_names)
    if request.device == "cuda" and facts.get("cuda_kernel_times"):
        fraction = custom_time_fraction(facts["cuda_kernel_times"], reference_names)
        rec.custom_kernel_time_fraction = fraction
        if fraction is not None and fraction < LOW_CUSTOM_TIME:
            rec.warnings.append(
                f"low_custom_kernel_time: custom kernels take {100 * fraction:.1f}% of device time "
                f"(< {100 * LOW_CUSTOM_TIME:.0f}%); the rest is PyTorch/library kernels"
            )
    if not facts.get("cases"):
        return
    if not request.require_custom_kernel:
        out["custom_kernel"] = (SKIP, f"relaxed by request; custom kernels seen: {custom or 'none'}")
        return
    where = "Triton launches" if request.device == "cpu" else "profiled CUDA kernels / Triton launches"
    if request.device == "cuda" and facts.get("profiler_available") is False:
        where = "Triton launches (the CUDA profiler was unavailable)"
    detail = f"custom kernels: {custom}" if custom else f"no custom kernel among the {where}: {rec.kernel_names or 'none'} (only PyTorch/library kernels)"
    K.merge(out, "custom_kernel", not custom, detail)


def _fill_timing(rec: Record, facts: dict[str, Any], base: dict[str, Any], request) -> None:
    stats = (facts.get("timing") or {}).get("stats")
    if base:
        rec.eager_ms, rec.compiled_ms = base.get("eager_ms"), base.get("compiled_ms")
        rec.baseline_ms, rec.baseline_type = base.get("baseline_ms"), base.get("baseline_type")
        rec.baseline_cached = base.get("cached")
        rec.ref_ms = rec.baseline_ms
        if base.get("error"):
            rec.baseline_error = base["error"] + (" (cached failure; retry_failed_baseline re-times it)" if base.get("cached") else "")
            rec.timing_flags.append("baseline_failed")
            rec.timing_details["baseline_error"] = rec.baseline_error
        if base.get("compile_error"):
            rec.timing_details["compile_error"] = base["compile_error"]
    if stats:
        rec.timing_method = stats["method"]
        rec.sol_ms, rec.sol_p10_ms, rec.sol_p90_ms = stats["median_ms"], stats["p10_ms"], stats["p90_ms"]
        rec.sol_cv, rec.sol_reps, rec.sol_wall_ms = stats["cv"], stats["reps"], stats.get("wall_ms")
        rec.timing_flags.extend(stats.get("flags") or [])
        rec.timing_details.update(stats.get("details") or {})
        if ESCAPED_STREAM in rec.timing_flags:
            # Work the events did not see (a side stream, a CPU thread) still costs the caller:
            # score what a synchronizing caller waits for, or the device's busy time per call,
            # whichever is larger, never what the timed stream shows.
            wall, busy = rec.sol_wall_ms or 0.0, rec.timing_details.get("device_busy_ms") or 0.0
            if max(wall, busy) > rec.sol_ms:
                rec.timing_details["event_median_ms"] = rec.sol_ms
                rec.timing_details["sol_ms_source"] = (
                    "synchronized wall clock per call" if wall >= busy else "device busy time per call (profiler)"
                ) + " (work escaped the timed stream)"
                rec.sol_ms = max(wall, busy)
    if rec.correct and rec.sol_ms and rec.baseline_ms:
        rec.speedup = rec.baseline_ms / rec.sol_ms
    if rec.timing_method == "cuda_events" and rec.sol_ms and rec.sol_ms < SMALL_KERNEL_MS:
        rec.warnings.append(
            f"small_kernel_timing: {rec.sol_ms * 1e3:.1f} us; separate evaluator runs of 12-15 us kernels "
            "differed by 1.4-3.8% on an H200 (benchmarks/results/evaluator_gpu_fidelity_*.md), "
            "so compare speedups this small with a few percent of margin"
        )
    if not rec.sizes:  # the roofline figures are for the default shapes
        sol = speed_of_light_ms(rec.problem_id, request.gpu, rec.precision_used)
        if sol is not None:
            rec.sol_roofline_ms = sol
            if rec.correct and rec.sol_ms and request.device == "cuda":
                rec.sol_fraction = sol / rec.sol_ms
