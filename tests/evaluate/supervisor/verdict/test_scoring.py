"""evaluate.supervisor.verdict.scoring: the record's timing fields (the supervisor's scored time, the solution
process's event figure beside it) and the speed-of-light figure it carries."""

from __future__ import annotations

import pytest

from kernelbench_v3.catalog.problem import get_problem
from kernelbench_v3.evaluate import EvalRequest, Record
from kernelbench_v3.evaluate.supervisor.verdict import problem_speed_of_light_ms
from kernelbench_v3.hardware.gpus import get_gpu
from kernelbench_v3.hardware.roofline import DEFAULT_ROOFLINE, speed_of_light_ms


def _timed_record(flags: list[str], per_call_ms: float, own_ms: float, failed: str | None = None) -> Record:
    from kernelbench_v3.evaluate.supervisor.timing import TimingOutcome
    from kernelbench_v3.evaluate.supervisor.verdict import SolutionFacts, fill_timing

    rec = Record(problem_id="level1/23_Softmax", status="correct", correct=True, sizes={"dim": 8})
    if failed:
        rec.status, rec.correct = "incorrect", False
        rec.check(failed, "fail", "the verdict's reason")
    stats = {
        "method": "supervisor_calls_cuda_graphs",
        "median_ms": per_call_ms,
        "p10_ms": per_call_ms * 0.98,
        "p90_ms": per_call_ms * 1.03,
        "ci_rel": 0.002,
        "reps": 100,
    }
    details = {"own_ms_per_call": own_ms}
    facts = SolutionFacts(timing=TimingOutcome(stats=stats, flags=flags, details=details))
    base = {"eager_ms": 1.0, "compiled_ms": 2.0, "baseline_ms": 1.0, "baseline_type": "eager"}
    fill_timing(rec, facts, base, EvalRequest("level1/23_Softmax", "x.py", device="cuda"))
    return rec


def test_the_scored_time_is_the_supervisors_and_the_own_figure_only_evidence():
    # A forged clock: the process's own figure says 0.01 ms; the supervisor's windows say 0.5 ms.
    cheat = _timed_record([], per_call_ms=0.5, own_ms=0.01)
    assert cheat.sol_ms == 0.5 and cheat.speedup == pytest.approx(2.0) and cheat.event_ms == 0.01
    # The record's percentiles are the net times', not copies of the median.
    assert cheat.sol_p10_ms < cheat.sol_ms < cheat.sol_p90_ms


def test_a_rejected_record_shows_no_time_and_keeps_the_raw_figure():
    # As side_stream_unsynchronized on the H200: rejected, with a window slope under zero.
    rejected = _timed_record(["work_before_window"], per_call_ms=-5.59, own_ms=0.01, failed="timed_outputs")
    assert (rejected.sol_ms, rejected.sol_p10_ms, rejected.sol_p90_ms, rejected.sol_cv) == (None,) * 4
    assert rejected.speedup is None and rejected.sol_fraction is None
    unscored = rejected.timing_details["unscored"]
    assert unscored["sol_ms"] == -5.59 and unscored["failed_check"] == "timed_outputs"
    assert rejected.sol_reps == 100 and "work_before_window" in rejected.timing_flags
    assert Record.from_json(rejected.to_json()).timing_details["unscored"]["sol_ms"] == -5.59


def test_a_cuda_timing_of_a_few_microseconds_carries_a_fidelity_warning():
    small = _timed_record([], per_call_ms=0.015, own_ms=0.015)
    assert [w for w in small.warnings if w.startswith("small_kernel_timing: 15.0 us")]
    large = _timed_record([], per_call_ms=0.4, own_ms=0.4)
    assert not [w for w in large.warnings if w.startswith("small_kernel_timing")]


def test_a_problem_speed_of_light_is_the_rooflines_at_default_sizes():
    problem = get_problem("level1/23_Softmax")
    flops, nbytes = DEFAULT_ROOFLINE[problem.problem_id][:2]
    want = speed_of_light_ms(flops, nbytes, get_gpu("h100"), "fp32")
    assert problem_speed_of_light_ms("level1/23_Softmax", "h100", "fp32") == want > 0


def test_an_unknown_problem_or_gpu_has_no_speed_of_light():
    assert problem_speed_of_light_ms("level1/no_such_problem", "h100", "fp32") is None
    assert problem_speed_of_light_ms("level1/23_Softmax", "a100x", "fp32") is None


def test_a_cpu_time_is_no_speedup_and_the_record_says_why():
    from kernelbench_v3.evaluate import describe_record
    from kernelbench_v3.evaluate.supervisor.timing import TimingOutcome
    from kernelbench_v3.evaluate.supervisor.verdict import SolutionFacts, fill_timing

    rec = Record(problem_id="level1/23_Softmax", status="correct", correct=True, device="cpu", sizes={"dim": 8})
    stats = {
        "method": "supervisor_calls_cpu",
        "median_ms": 40.0,
        "p10_ms": 39.0,
        "p90_ms": 41.0,
        "ci_rel": 0.1,
        "reps": 4,
    }
    facts = SolutionFacts(timing=TimingOutcome(stats=stats, flags=[], details={}))
    base = {"eager_ms": 0.02, "compiled_ms": 0.04, "baseline_ms": 0.02, "baseline_type": "eager"}
    fill_timing(rec, facts, base, EvalRequest("level1/23_Softmax", "x.py", device="cpu"))
    assert rec.speedup is None and rec.timing_meaningful is False
    assert "tests the machinery" in rec.timing_note
    assert rec.timing_details["cpu_time_ratio"] == pytest.approx(0.0005)
    assert "speedup: n/a on CPU (interpreter timing tests the machinery)" in describe_record(rec)
    assert "speedup=0.000" not in describe_record(rec) and "0.000x" not in describe_record(rec)
    gpu = _timed_record([], per_call_ms=0.4, own_ms=0.38)
    assert gpu.timing_meaningful is True and gpu.timing_note == ""


def test_an_fp32_gemm_floor_is_the_tf32_peak():
    # An honest 3xTF32 GEMM runs three TF32 products: above the TF32 floor, under the plain FP32 one.
    from kernelbench_v3.evaluate.supervisor.verdict import physics
    from kernelbench_v3.hardware.roofline import fastest_arithmetic

    gemm = "level1/1_Square_matrix_multiplication_"
    flops, nbytes = DEFAULT_ROOFLINE[gemm]
    tf32 = speed_of_light_ms(flops, nbytes, get_gpu("h200"), "tf32")
    fp32 = speed_of_light_ms(flops, nbytes, get_gpu("h200"), "fp32")
    assert physics.speed_of_light_ms(gemm, "NVIDIA H200", "fp32") == tf32 < fp32
    three_tf32 = 3 * tf32
    assert three_tf32 < fp32 * (1 - physics.MARGIN)  # the old floor would have called it impossible
    assert physics.impossible(three_tf32, gemm, "NVIDIA H200", "fp32", True) == ""
    assert "speed of light" in physics.impossible(tf32 / 2, gemm, "NVIDIA H200", "fp32", True)
    assert fastest_arithmetic("h100", "fp16") == "fp16" and fastest_arithmetic("h100", "bf16") == "bf16"


def test_the_gate_floor_depends_on_the_mode_and_names_mps_when_it_is_off():
    from kernelbench_v3.evaluate.supervisor.timing.resolution import PLAIN_FLOOR_S, UNRESOLVED, unresolved

    why = unresolved(15e-6, mps=False)
    assert why.startswith(UNRESOLVED) and "15.0 us" in why and "MPS" in why and "--no-mps" in why
    assert unresolved(15e-6, mps=True) == "" and unresolved(-1e-6, mps=True) == ""  # physics judges that
    assert unresolved(-1e-6, mps=False).startswith(UNRESOLVED)
    assert unresolved(PLAIN_FLOOR_S, mps=False) == "" and unresolved(0.5e-3, mps=False) == ""


def _unresolved_record(per_call_ms: float) -> Record:
    from kernelbench_v3.evaluate.supervisor.timing import TimingOutcome
    from kernelbench_v3.evaluate.supervisor.timing.resolution import UNRESOLVED, unresolved
    from kernelbench_v3.evaluate.supervisor.verdict import SolutionFacts, fill_timing

    rec = Record(problem_id="level1/26_GELU_", status="correct", correct=True)
    why = unresolved(per_call_ms * 1e-3, mps=False)
    stats = {"method": "supervisor_gated_cuda_graphs", "median_ms": per_call_ms, "p10_ms": per_call_ms / 2}
    stats.update(p90_ms=per_call_ms * 2, ci_rel=0.3, reps=400, unresolved=why)
    timing = TimingOutcome(stats=stats, flags=[UNRESOLVED], details={"unresolved": why})
    base = {"eager_ms": 0.011, "compiled_ms": 0.013, "baseline_ms": 0.011, "baseline_type": "eager"}
    fill_timing(rec, SolutionFacts(timing=timing), base, EvalRequest("level1/26_GELU_", "x.py", device="cuda"))
    return rec


def test_a_plain_mode_time_under_the_floor_is_no_number_but_the_verdict_stands():
    rec = _unresolved_record(0.004)  # an honest 10 us GELU the switch's jitter read as 4 us
    assert rec.correct and rec.status == "correct"
    assert rec.sol_ms is None and rec.speedup is None and rec.sol_fraction is None
    assert "timing_unresolved" in rec.timing_flags and rec.timing_note.startswith("timing_unresolved")
    assert rec.timing_details["unscored"]["sol_ms"] == 0.004
    assert rec.timing_details["unscored"]["reason"] == "timing_unresolved"


def test_an_unresolved_figure_is_never_judged_against_physics():
    from kernelbench_v3.evaluate.supervisor.timing import TimingOutcome
    from kernelbench_v3.evaluate.supervisor.verdict.judgement import _judge_time

    rec = Record(problem_id="level1/26_GELU_", status="correct", correct=True, ran_on="NVIDIA H200")
    stats = {"method": "supervisor_gated_cuda_graphs", "median_ms": -0.0028}  # the switch's jitter
    out: dict = {}
    _judge_time(out, rec, TimingOutcome(stats={**stats, "unresolved": "timing_unresolved: ..."}))
    assert "impossible_time" not in out
    _judge_time(out, rec, TimingOutcome(stats=stats))  # the same figure, resolved, is impossible
    assert out["impossible_time"][0] == "fail"


def test_a_baseline_under_the_plain_floor_gives_no_speedup():
    rec = _timed_record([], per_call_ms=0.5, own_ms=0.5)
    assert rec.speedup is not None  # baseline 1 ms: resolved
    from kernelbench_v3.evaluate.supervisor.timing import TimingOutcome
    from kernelbench_v3.evaluate.supervisor.verdict import SolutionFacts, fill_timing

    rec = Record(problem_id="level1/23_Softmax", status="correct", correct=True)
    stats = {"method": "supervisor_gated_cuda_graphs", "median_ms": 0.2, "p10_ms": 0.19, "p90_ms": 0.21}
    stats.update(ci_rel=0.002, reps=100, unresolved="")
    base = {"eager_ms": 0.015, "compiled_ms": 0.09, "baseline_ms": 0.015, "baseline_type": "eager"}
    facts = SolutionFacts(timing=TimingOutcome(stats=stats))
    fill_timing(rec, facts, base, EvalRequest("level1/23_Softmax", "x.py", device="cuda"))
    assert rec.sol_ms == 0.2 and rec.speedup is None
    assert "timing_unresolved" in rec.timing_flags and "the baseline" in rec.timing_note
