"""A human-readable summary of a finished Record (what `kbv3 eval` prints without --json).

It reads only the record, so it lives beside `record` and outside the trusted `supervisor/`:
nothing here decides a verdict or a time."""

from __future__ import annotations

from .record import Record


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g} ms"


CPU_SPEEDUP = "n/a on CPU (interpreter timing tests the machinery)"


def speedup_text(record: Record) -> str:
    """The speedup as a user should read it: `1.23x`, `n/a on CPU (...)`, `n/a (why)` or `n/a`."""
    if record.speedup is not None:
        return f"{record.speedup:.3f}x"
    if record.timing_meaningful is False or (record.timing_meaningful is None and record.device == "cpu"):
        return CPU_SPEEDUP
    if record.timing_note.startswith("timing_unresolved"):
        return "n/a (timing_unresolved: see the timing note)"
    return "n/a"


def describe_record(record: Record) -> str:
    lines = [
        f"{record.problem_id}  <-  {record.solution_path}",
        f"status: {record.status}" + (f"  (failed check: {record.failed_check})" if record.failed_check else ""),
    ]
    if record.error:
        lines.append("reason: " + record.error.strip().splitlines()[0][:300])
    if record.sizes_note:
        lines.append("sizes: " + ", ".join(f"{k}={v}" for k, v in record.sizes.items()) + f"  ({record.sizes_note})")
    lines.append("checks: " + ", ".join(f"{name}={outcome}" for name, outcome in record.checks.items()))
    if record.max_abs_error is not None:
        lines.append(
            f"error over every case: max |out - ref| {record.max_abs_error:.3g}, relative "
            f"||out - ref|| / ||ref|| {record.rel_error:.3g} (ref: {record.error_reference}); "
            f"tolerance {record.tolerance_mode}"
        )
    if record.kernel_names:
        lines.append("kernels: " + ", ".join(record.kernel_names[:8]))
    if record.timing_method:
        lines.append(
            f"solution: {_ms(record.sol_ms)} per call [{record.timing_method}], {record.sol_reps or 0} timed calls"
            + (f", flags {record.timing_flags}" if record.timing_flags else "")
        )
        details = record.timing_details
        calls = details.get("calls") or {}
        if calls:
            half = calls.get("ci95_rel_halfwidth")
            lines.append(
                f"timing: the supervisor's one-call windows less the echo's "
                f"({details.get('timing_method', record.timing_method)}), median of {calls.get('calls')} calls, "
                f"95% interval {'n/a' if half is None else f'+-{100 * half:.2f}%'}, "
                f"p10-p90 {_ms(calls.get('p10_ms'))}-{_ms(calls.get('p90_ms'))}; "
                f"the solution process's own figure {record.event_ms or 0:.4g} ms per call (evidence, not scored)"
            )
    if record.phase_s:
        lines.append("phases: " + ", ".join(f"{name} {sec:.1f}s" for name, sec in record.phase_s.items()))
    if record.wall_phase_s:  # the whole process, where a CLI measured it (`evaluate.wall`)
        shown = ", ".join(f"{name} {sec:.1f}s" for name, sec in record.wall_phase_s.items() if abs(sec) >= 0.05)
        lines.append(f"wall: {record.wall_s or 0:.1f}s from the process's start: {shown}")
    if record.baseline_ms is not None:
        lines.append(
            f"baseline: {_ms(record.baseline_ms)} ({record.baseline_type}); eager {_ms(record.eager_ms)}, "
            f"compiled {_ms(record.compiled_ms)}" + ("  [cached]" if record.baseline_cached else "")
        )
    if record.speedup is not None:
        lines.append(f"speedup: {record.speedup:.3f}x")
    elif record.timing_meaningful is False or record.timing_note:
        lines.append(f"speedup: {speedup_text(record)}")
    if record.timing_note and record.timing_meaningful:
        lines.append("timing note: " + record.timing_note)
    if record.sol_fraction is not None:
        lines.append(f"speed of light: {_ms(record.sol_roofline_ms)} ({record.sol_fraction:.1%} of it reached)")
    return "\n".join(lines)
