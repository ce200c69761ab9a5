"""The human summary of a Record."""

from __future__ import annotations

from kernelbench_v3.evaluate import Record


def test_the_readable_report_gives_the_scored_method_its_precision_the_evidence_and_phases():
    from kernelbench_v3.evaluate import describe_record

    record = Record(
        problem_id="level1/23_Softmax",
        status="correct",
        timing_method="supervisor_calls_cuda_graphs",
        sol_ms=0.016,
        event_ms=0.0155,
        timing_details={
            "calls": {"calls": 400, "ci95_rel_halfwidth": 0.004, "p10_ms": 0.015, "p90_ms": 0.018},
            "timing_method": "supervisor_calls_cuda_graphs",
        },
        phase_s={"reference": 9.6, "candidate": 14.1},
    )
    text = describe_record(record)
    assert "one-call windows less the echo's (supervisor_calls_cuda_graphs), median of 400 calls" in text
    assert "95% interval +-0.40%" in text
    assert "own figure 0.0155 ms per call (evidence, not scored)" in text
    assert "phases: reference 9.6s, candidate 14.1s" in text
    assert "timing:" not in describe_record(Record(problem_id="x", sol_ms=1.0))


def test_a_missing_figure_reads_n_a_and_each_error_figure_says_what_it_compares():
    from kernelbench_v3.evaluate import describe_record, speedup_text

    unresolved = Record(
        problem_id="level1/26_GELU_",
        status="correct",
        correct=True,
        timing_method="supervisor_gated_cuda_graphs",
        timing_meaningful=True,
        timing_note="timing_unresolved: the solution's calls measured 4.1 us, under the 150 us ...",
        baseline_ms=0.011,
        baseline_type="eager",
    )
    text = describe_record(unresolved)
    assert "solution: n/a per call" in text and " - " not in text.replace(" <- ", "")
    assert "speedup: n/a (timing_unresolved" in text and "timing note: timing_unresolved" in text
    assert speedup_text(Record(problem_id="x", timing_meaningful=True)) == "n/a"
    wrong = Record(
        problem_id="level1/26_GELU_",
        status="incorrect",
        max_abs_error=0.5,
        rel_error=0.1,
        error_reference="float64 reference",
        tolerance_mode="v3",
    )
    assert "error over every case: max |out - ref| 0.5, relative ||out - ref|| / ||ref|| 0.1" in describe_record(wrong)


def test_the_readable_report_shows_the_whole_process_where_it_was_measured():
    from kernelbench_v3.evaluate import describe_record

    parts = {"cli_import": 0.1, "supervisor_import": 1.2, "mps_daemon": 0.0, "reference": 2.0, "unattributed": 0.01}
    text = describe_record(Record(problem_id="x", wall_s=3.31, wall_phase_s=parts))
    assert "wall: 3.3s from the process's start: cli_import 0.1s, supervisor_import 1.2s, reference 2.0s" in text
    assert "mps_daemon" not in text and "wall:" not in describe_record(Record(problem_id="x"))
