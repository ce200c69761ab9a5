"""The human summary of a Record."""

from __future__ import annotations

from kernelbench_v3.evaluate import Record


def test_the_readable_report_gives_the_scored_method_its_precision_the_evidence_and_phases():
    from kernelbench_v3.evaluate.supervisor.report import describe

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
    text = describe(record)
    assert "one-call windows less the echo's (supervisor_calls_cuda_graphs), median of 400 calls" in text
    assert "95% interval +-0.40%" in text
    assert "own figure 0.0155 ms per call (evidence, not scored)" in text
    assert "phases: reference 9.6s, candidate 14.1s" in text
    assert "timing:" not in describe(Record(problem_id="x", sol_ms=1.0))
