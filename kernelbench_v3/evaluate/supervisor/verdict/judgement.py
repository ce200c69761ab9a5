"""The verdict: the supervisor's judgement of what it got back from the solution process.

Inputs are the reference (computed in the supervisor) and `SolutionFacts` (the replies, with the
outputs copied out of the arena). Values, shapes and dtypes are compared here against the
reference; what the solution process said about itself (state-dict report, mutated inputs,
aliasing, tampering it noticed, kernel evidence) is evidence, judged by the named checks. Every
planned case must come back: a case that did not, without a failure that explains it, makes the
verdict `incomplete`, never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...cases import INPUT_REUSE, STRESS
from ...record import FAIL, NOT_RUN, PASS, SKIP, Record
from ..session import CaseResult, SessionLost
from ..timing import TIMING_GAP_FLAGS, TimingOutcome
from . import kernel_rule, physics
from .compare import calibrate_strict, compare_case, merge, ordered_outcomes, tolerance_for

# The reference (`reference.ReferenceRun`) is read here, never imported: the reference is vetted
# by the verdict's own rules (`compare.all_finite`, `kernel_rule.forbidden_ops`), so the arrow
# points from the reference to the verdict.
ReferenceRun = Any


@dataclass
class SolutionFacts:
    sandbox: dict[str, Any] = field(default_factory=dict)
    class_name: str = ""
    failed_stage: str | None = None
    error: str = ""
    state_dict: dict[str, Any] = field(default_factory=dict)
    import_flag_changes: list[str] = field(default_factory=list)
    tampered: list[str] = field(default_factory=list)
    cases: dict[str, CaseResult] = field(default_factory=dict)
    evidence_samples: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (which call, evidence)
    timing: TimingOutcome | None = None
    timing_skipped: str = ""
    lost: SessionLost | None = None
    lost_during: str = ""
    # Case comparisons already made (the verdict is also drawn before timing, to skip it for a
    # solution already wrong): outputs of hundreds of MB compare in float64 once, not twice.
    compared: dict[tuple[Any, ...], Any] = field(default_factory=dict)


def _compared(facts: SolutionFacts, name: str, run: Any, got: Any, request: Any, precision: str, calibrated: Any):
    """Case `name`'s comparison, made once per rule (`facts.compared`), on the evaluation's
    device (the GPU for a CUDA evaluation)."""
    key = (name, request.tolerance, precision, calibrated)
    if key not in facts.compared:
        facts.compared[key] = compare_case(
            name, run.case.group, got, run.saved, run.entry, request.tolerance, precision, calibrated, request.device
        )
    return facts.compared[key]


def compare_outputs(facts: SolutionFacts, ref: ReferenceRun, request: Any, precision: str) -> None:
    """Make the value comparisons `judge` will read, for every case whose output came back as a
    tensor of the expected layout: the part of a verdict that grows with the output's bytes, run
    as a step of its own so its seconds are told apart (`solution_compare`)."""
    calibrated = calibrate_strict(ref.entries())
    for name in ref.order:
        result, run = facts.cases.get(name), ref.cases[name]
        if result is None or result.output is None or result.reply.output.type_name != "Tensor":
            continue
        if run.case.group in (STRESS, INPUT_REUSE) and not run.entry["finite"]:
            continue  # skipped by the verdict: the reference itself overflows
        _compared(facts, name, run, result.output, request, precision, calibrated)


def judge(rec: Record, facts: SolutionFacts, ref: ReferenceRun, request: Any, scan: Any | None) -> None:
    out: dict[str, tuple[str, str]] = {}
    if scan is not None and not scan.parsed and facts.failed_stage == "import":
        # Source that does not parse is an import failure (Python's message and line are in it).
        out["source_scan"] = (SKIP, "the source does not parse: see the import check")
    elif scan is not None:
        out["source_scan"] = (PASS, "") if scan.ok else (FAIL, scan.summary())
    elif not request.scan_source:
        out["source_scan"] = (SKIP, "turned off by request")
    if facts.lost is not None:
        merge(out, "process", True, f"{facts.lost.reason} (while {facts.lost_during})")
    stage = facts.failed_stage
    rec.solution_class = facts.class_name
    rec.compiled = bool(facts.cases) and stage not in ("import", "construct")
    if stage in ("import", "construct", "run"):
        merge(out, stage, True, facts.error[:2000])
    elif stage:
        merge(out, "process", True, f"the solution process failed during {stage}: {facts.error[:1500]}")
    for shape, report in facts.state_dict.items():
        problems = [f"{k}: {', '.join(map(str, v))}" for k, v in (report or {}).items() if v]
        merge(out, "state_dict", bool(problems), f"{shape} shape: " + "; ".join(problems) if problems else "")
    _judge_global_state(out, facts)
    _judge_cases(rec, out, facts, ref, request)
    missing = [n for n in ref.order if n not in facts.cases]
    if "other_shape" not in out and "other" not in ref.shapes:
        out["other_shape"] = (SKIP, "; ".join(ref.notes) or "not requested")
    if "precision" not in out:
        out["precision"] = (SKIP, "no float64 reference for this problem")
    _judge_sampled_calls(out, facts)
    if facts.evidence_samples:
        rule = "relaxed" if not request.require_custom_kernel else request.kernel_rule
        checks, kfacts = kernel_rule.judge_samples(
            facts.evidence_samples,
            device=request.device,
            rule=rule,
            reference_ops=ref.ops,
            reference_kernels=ref.kernel_names,
            reference_matmul_flops=ref.matmul_flops,
        )
        out.update(checks)
        if rule == "strict":
            _judge_observed_ops(out, facts, ref)
        rec.kernel_rule = rule
        rec.kernel_names = kfacts.get("kernel_names", [])
        rec.triton_launches = kfacts.get("launches")
        rec.reference_kernel_names = list(ref.kernel_names)
        rec.custom_kernel_time_fraction = kfacts.get("custom_kernel_time_fraction")
        rec.kernel_evidence = kfacts
    if facts.timing is not None:
        t = facts.timing
        merge(
            out,
            "timed_outputs",
            bool(t.failures),
            f"{len(t.failures)} of {t.verified} checked timed outputs are wrong: {t.failures[0]}"
            if t.failures
            else f"{t.verified} randomly chosen timed outputs match the reference",
        )
        _judge_time(out, rec, t)
    _mark_dependent_not_run(out)
    for name, outcome, detail in ordered_outcomes(out):
        rec.check(name, outcome, detail)
    failed = [n for n, (o, _) in out.items() if o == FAIL]
    if not failed and missing:
        rec.status, rec.correct = "incomplete", False
        rec.check("completeness", FAIL, f"planned cases that never came back: {missing}")
        rec.error = f"incomplete: the cases {missing} never came back"
    elif not failed and facts.cases:
        rec.status, rec.correct = "correct", True
    else:
        rec.status = "failed" if not rec.compiled else "incorrect"
        rec.correct = False
        rec.error = rec.check_details.get(rec.failed_check or "", facts.error or "incomplete evaluation")[:2000]


def _judge_time(out: dict[str, tuple[str, str]], rec: Record, timing: TimingOutcome) -> None:
    """The time itself: nothing of the solution's ran outside its windows (`timing_gap`: work past
    DONE, work beside the input write, a device kept busy, a gate opened by the solution), and
    physics as a floor (`impossible_time`)."""
    if timing.stats is not None or timing.gap_reasons:
        reasons = [timing.gap_reasons[f] for f in TIMING_GAP_FLAGS if f in timing.flags]
        merge(out, "timing_gap", bool(reasons), "; ".join(reasons))
    if timing.stats and not timing.stats.get("unresolved"):  # physics judges resolved figures only
        why = physics.impossible(
            float(timing.stats["median_ms"]), rec.problem_id, rec.ran_on, rec.precision_used, not rec.sizes
        )
        merge(out, "impossible_time", bool(why), why)


# Checks that compare values on further inputs: once the basic cases give a wrong value they
# add nothing, so they read `not run` (the failure that decided the verdict is the first one).
BASIC_VALUE_CHECKS = ("output_shape", "output_dtype", "finite", "correctness")
DEPENDENT_VALUE_CHECKS = ("stress", "other_shape", "recompute", "input_reuse", "precision", "timed_outputs")


def _mark_dependent_not_run(out: dict[str, tuple[str, str]]) -> None:
    first = next((n for n in BASIC_VALUE_CHECKS if out.get(n, ("",))[0] == FAIL), None)
    if first is None:
        return
    # A wrong shape leaves the values unjudged: no later basic check can have passed or failed.
    later = BASIC_VALUE_CHECKS[1:] if first == "output_shape" else ()
    for name in (*later, *DEPENDENT_VALUE_CHECKS):
        if name in out and out[name][0] in (PASS, FAIL):
            out[name] = (NOT_RUN, f"not judged: {first} failed first")


def _judge_sampled_calls(out: dict[str, tuple[str, str]], facts: SolutionFacts) -> None:
    """A judged call, timed ones included, may not change its inputs or return one of them (or a
    view of one): on a timed call its inputs are views of the one timing region, so this is
    judged by byte range (`provenance`), and counted over every observed call (`aliased_calls`,
    `mutated_calls`), not only over the kept samples."""
    for label, ev in facts.evidence_samples:
        if ev.get("mutated_inputs") or ev.get("mutated_calls"):
            merge(
                out,
                "input_mutation",
                True,
                f"{label}: input(s) {ev.get('mutated_inputs') or '?'} were modified "
                f"({int(ev.get('mutated_calls') or 0)} observed call(s) changed an input)",
            )
        if ev.get("output_aliases") or ev.get("aliased_calls"):
            what = ", ".join(ev.get("output_aliases") or []) or "an input"
            merge(
                out,
                "output_aliasing",
                True,
                f"{label}: the output shares memory with {what} "
                f"({int(ev.get('aliased_calls') or 0)} observed call(s) returned an input)",
            )


def _judge_observed_ops(out: dict[str, tuple[str, str]], facts: SolutionFacts, ref: ReferenceRun) -> None:
    """Every case, the capture of the timed calls and every eager timed window ran observed: a
    library op or one of the reference's compute ops dispatched in any of them fails
    `library_ops`, so behaving only when a sampled call is profiled does not pass."""
    observed: set[str] = set()
    for result in facts.cases.values():
        observed |= set((result.reply.evidence or {}).get("ops") or {})
    for seen in facts.timing.observed if facts.timing is not None else []:
        observed |= set(seen.get("ops") or {})
    bad = sorted(
        set(kernel_rule.forbidden_ops(dict.fromkeys(observed)))
        | (kernel_rule.reference_compute_ops(ref.ops) & observed)
    )
    if bad:
        merge(out, "library_ops", True, f"dispatched by the solution's forward in observed calls: {bad}")


def _judge_global_state(out: dict[str, tuple[str, str]], facts: SolutionFacts) -> None:
    if not facts.class_name:
        return
    flag_changes = sorted({f for r in facts.cases.values() for f in r.reply.flag_changes})
    bad = [str(t) for t in facts.tampered] + [f"torch flag changed during forward: {f}" for f in flag_changes]
    note = f" (import changed and was reset: {facts.import_flag_changes})" if facts.import_flag_changes else ""
    merge(out, "global_state", bool(bad), ("replaced/changed: " + ", ".join(bad[:20]) if bad else "") + note)


def _judge_cases(
    rec: Record, out: dict[str, tuple[str, str]], facts: SolutionFacts, ref: ReferenceRun, request: Any
) -> None:
    calibrated = calibrate_strict(ref.entries())
    atol, rtol = tolerance_for(request.tolerance, rec.precision_used, calibrated)
    rec.atol, rec.rtol = atol, rtol
    worst_abs, worst_rel, err_ref = None, None, ""
    for name in ref.order:
        result = facts.cases.get(name)
        if result is None:
            continue
        run, reply = ref.cases[name], result.reply
        group = run.case.group
        mutated = reply.mutated_inputs or []
        merge(out, "input_mutation", bool(mutated), f"{name}: input(s) {mutated} were modified" if mutated else "")
        info = reply.output
        if info.type_name != "Tensor":
            merge(out, "output_shape", True, f"{name}: the solution returned {info.type_name}, not a tensor")
            continue
        aliases = reply.aliases or []
        merge(
            out,
            "output_aliasing",
            bool(aliases),
            f"{name}: the output shares memory with {', '.join(map(str, aliases))}" if aliases else "",
        )
        if group in (STRESS, INPUT_REUSE) and not run.entry["finite"]:
            out.setdefault(group, (SKIP, f"{name}: the reference itself overflows"))
            continue
        got = result.output
        if got is None:  # the output did not fit its slot: its shape or dtype differs
            merge(
                out,
                "output_shape",
                list(info.shape) != run.entry["shape"],
                f"{name}: shape {tuple(info.shape)}, expected {tuple(run.entry['shape'])}",
            )
            merge(out, "output_dtype", True, f"{name}: dtype {info.dtype}, expected {run.entry['dtype']}")
            continue
        verdict = _compared(facts, name, run, got, request, rec.precision_used, calibrated)
        for check in ("output_shape", "output_dtype", "finite", group, "precision"):
            if check in verdict.failures:
                merge(out, check, True, verdict.failures[check])
            elif check != "precision" or verdict.precision_ok is not None:
                merge(out, check, False)
        if verdict.max_abs is not None:
            worst_abs = max(worst_abs or 0.0, verdict.max_abs)
        if verdict.rel_error is not None and (verdict.error_reference == "float64" or err_ref != "float64"):
            if verdict.error_reference != err_ref:
                worst_rel, err_ref = None, verdict.error_reference
            worst_rel = max(worst_rel or 0.0, verdict.rel_error)
    rec.max_abs_error, rec.rel_error, rec.error_reference = worst_abs, worst_rel, err_ref
