"""A human-readable summary of a Record (what `kbv3 eval` prints without --json)."""

from __future__ import annotations

from .record import Record


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g} ms"


CPU_SPEEDUP = "n/a on CPU (interpreter timing tests the machinery)"


def speedup_text(record: Record) -> str:
    """The speedup as a user should read it: `1.23x`, `n/a on CPU (...)`, or `-`."""
    if record.speedup is not None:
        return f"{record.speedup:.3f}x"
    if record.timing_meaningful is False or (record.timing_meaningful is None and record.device == "cpu"):
        return CPU_SPEEDUP
    return "-"


def describe(record: Record) -> str:
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
            f"error: max abs {record.max_abs_error:.3g}, relative {record.rel_error:.3g} "
            f"(vs {record.error_reference}); tolerance {record.tolerance_mode}"
        )
    if record.kernel_names:
        lines.append("kernels: " + ", ".join(record.kernel_names[:8]))
    if record.timing_method:
        lines.append(
            f"solution: {_ms(record.sol_ms)} median [{record.timing_method}], p10 {_ms(record.sol_p10_ms)}, "
            f"p90 {_ms(record.sol_p90_ms)}, CV {record.sol_cv:.3g}, {record.sol_reps} reps"
            + (f", flags {record.timing_flags}" if record.timing_flags else "")
        )
        details = record.timing_details
        if "median_ci_rel" in details:
            clock = (
                f"; SM clock {details['sm_clock_mhz_before']} -> {details.get('sm_clock_mhz_after', '?')} MHz"
                if "sm_clock_mhz_before" in details
                else ""
            )
            lines.append(f"timing precision: median within +-{details['median_ci_rel']:.2%} (95% CI){clock}")
        if details.get("supervisor_ms") is not None:
            lines.append(
                f"supervisor's clock: {details['supervisor_ms']:.4g} ms per call back to back "
                f"({details.get('verified_timed_outputs', 0)} timed outputs verified)"
                + ("; the reported time was replaced by it" if "supervisor_clock" in record.timing_flags else "")
            )
    if record.phase_s:
        lines.append("phases: " + ", ".join(f"{name} {sec:.1f}s" for name, sec in record.phase_s.items()))
    if record.baseline_ms is not None:
        lines.append(
            f"baseline: {_ms(record.baseline_ms)} ({record.baseline_type}); eager {_ms(record.eager_ms)}, "
            f"compiled {_ms(record.compiled_ms)}" + ("  [cached]" if record.baseline_cached else "")
        )
    if record.speedup is not None:
        lines.append(f"speedup: {record.speedup:.3f}x")
    elif record.timing_meaningful is False:
        lines.append(f"speedup: {speedup_text(record)}")
    if record.sol_fraction is not None:
        lines.append(f"speed of light: {_ms(record.sol_roofline_ms)} ({record.sol_fraction:.1%} of it reached)")
    return "\n".join(lines)
