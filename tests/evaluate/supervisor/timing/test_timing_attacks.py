"""Attacks on how the supervisor times and observes a solution (tests/solutions/timing_attacks/),
on CPU with the static scan off: each fails its named check or is scored at its true time.

The scored time is the supervisor's own clock over one-call windows whose outputs it judges as
cases; the solution process's clocks, handlers and caches can change only the evidence or the
verdict. Nothing here asserts a measured time or a ratio of times.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from kernelbench_v3.evaluate import EvalRequest, Record, evaluate
from tests.paths import EXAMPLES, TIMING_ATTACKS

pytestmark = pytest.mark.slow

SOFTMAX_SIZES = {"batch_size": 4, "dim": 96}
# attack -> the check the verdict must name, or "correct" (then it is scored by the supervisor)
EXPECTED = {
    "done_without_work": "timed_outputs",
    "done_before_work": "timed_outputs",
    # The timed path differs from the cases': the profiled timed call shows other kernels than the
    # profiled cases (custom_kernel), and the judged timed calls fail the case rules (timed_outputs).
    # calls_batched: which fails first depends on whether the profiled call hit its cache.
    "calls_batched": ("custom_kernel", "timed_outputs"),
    "timed_only_precision": "custom_kernel",
    "timed_told_by_storage": "custom_kernel",
    "padded_calls": "correct",
    "timer_scaled_fast": "correct",
    "timer_scaled_slow": "correct",
    "timer_divided_30": "correct",
    # On CPU the profiler never runs, so the Triton branch never does either; on CUDA the sampled
    # calls pass custom_kernel and library_ops fails on the unprofiled ones (benchmarks/).
    "evidence_switch_profiler": "custom_kernel",
    "dispatch_probe_switch": "correct",
    "copy_kernel_beside_op": "library_ops",
    "elementwise_torch_softmax": "main_work",
    "numpy_gemm_token_kernel": "main_work",
    "numpy_softmax_copy_kernel": "main_work",
    "broadcast_gemm_token_kernel": "main_work",
    # Its least-squares answers are PyTorch work (main_work, on the timed calls that use them)
    # and they are wrong on new random inputs (timed_outputs).
    "linear_from_stored": "main_work",
}
ALSO_FAILED = {
    "evidence_switch_profiler": "library_ops",
    "linear_from_stored": "timed_outputs",
    "calls_batched": "timed_outputs",
    "timed_only_precision": "timed_outputs",
    "timed_told_by_storage": "timed_outputs",
}


def _problem(path) -> str:
    return re.search(r"^Problem: (\S+)", path.read_text(), re.M).group(1)


def _request(problem: str, path) -> EvalRequest:
    sizes = SOFTMAX_SIZES if problem == "level1/23_Softmax" else {}
    return EvalRequest(
        problem,
        path,
        device="cpu",
        sizes=sizes,
        baseline=False,
        seeds=(42, 123, 456),
        timing_seconds=1.0,
        scan_source=False,
    )


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> dict[str, Record]:
    cache = tmp_path_factory.mktemp("cache")
    items = {p.stem: p for p in sorted(TIMING_ATTACKS.glob("*.py"))}
    items["honest_softmax"] = EXAMPLES / "level1/23_Softmax.py"

    def run(item):
        name, path = item
        problem = "level1/23_Softmax" if name == "honest_softmax" else _problem(path)
        return name, evaluate(_request(problem, path), cache_dir=cache)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(run, items.items()))


def test_every_timing_attack_has_an_expectation():
    assert sorted(p.stem for p in TIMING_ATTACKS.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_timing_attack_fails_its_check_or_is_scored_by_the_supervisor(records, name):
    record = records[name]
    where = (record.status, record.failed_check, record.error, record.timing_flags, record.checks)
    if EXPECTED[name] == "correct":
        assert record.correct, where
        assert record.timing_method == "supervisor_calls_cpu" and record.sol_ms, where
    else:
        assert not record.correct, where
        expected = EXPECTED[name] if isinstance(EXPECTED[name], tuple) else (EXPECTED[name],)
        assert record.failed_check in expected, where
        if name in ALSO_FAILED:
            assert record.checks[ALSO_FAILED[name]] == "fail", where


@pytest.mark.parametrize("name", ["timer_scaled_fast", "timer_scaled_slow", "timer_divided_30"])
def test_a_forged_clock_changes_only_the_evidence(records, name):
    # The process's own figure is kept apart from the score, which the supervisor's clock took.
    record = records[name]
    assert record.event_ms == record.timing_details["own_ms_per_call"], record.timing_details
    assert record.sol_ms == record.timing_details["calls"]["median_ms"], record.timing_details


def test_every_judged_timed_call_of_the_honest_solution_passes_the_case_rules(records):
    record = records["honest_softmax"]
    assert record.correct and record.timing_details["verified_calls"] > 0, record.timing_details
    assert record.checks["timed_outputs"] == "pass" and record.checks["impossible_time"] == "pass"


def test_the_probing_solution_never_took_its_library_branch(records):
    record = records["dispatch_probe_switch"]
    assert record.checks["library_ops"] == "pass" and record.correct, record.check_details
