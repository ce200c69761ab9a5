"""The human summary of a Record."""

from __future__ import annotations

from kernelbench_v3.evaluate import Record


def test_the_readable_report_gives_timing_precision_clock_and_phases():
    from kernelbench_v3.evaluate.report import describe

    record = Record(
        problem_id="level1/23_Softmax",
        status="correct",
        timing_method="cuda_events",
        sol_ms=0.016,
        sol_p10_ms=0.015,
        sol_p90_ms=0.017,
        sol_cv=0.3,
        sol_reps=1911,
        timing_details={"median_ci_rel": 0.002, "sm_clock_mhz_before": 1924.6, "sm_clock_mhz_after": 1943.3},
        phase_s={"reference": 9.6, "candidate": 14.1},
    )
    text = describe(record)
    assert "median within +-0.20% (95% CI); SM clock 1924.6 -> 1943.3 MHz" in text
    assert "phases: reference 9.6s, candidate 14.1s" in text
    assert "timing precision" not in describe(
        Record(
            problem_id="x",
            timing_method="cpu_wall_clock",
            sol_ms=1.0,
            sol_p10_ms=1.0,
            sol_p90_ms=1.0,
            sol_cv=0.0,
            sol_reps=3,
        )
    )
    cpu = describe(
        Record(
            problem_id="x",
            timing_method="cpu_wall_clock",
            sol_ms=1.0,
            sol_p10_ms=1.0,
            sol_p90_ms=1.0,
            sol_cv=0.0,
            sol_reps=3,
            timing_flags=["supervisor_clock"],
            timing_details={"median_ci_rel": 0.05, "supervisor_ms": 2.5, "verified_timed_outputs": 7},
        )
    )
    assert "(95% CI)\n" in cpu + "\n" and "SM clock" not in cpu  # no clock to speak of on the CPU
    assert (
        "supervisor's clock: 2.5 ms per call back to back (7 timed outputs verified); the reported time was replaced"
        in cpu
    )
