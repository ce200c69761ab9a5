"""Attacks on how the supervisor times and observes a solution (tests/solutions/timing_attacks/),
on CPU with the static scan off: each fails its named check or is scored at its true time.

The scored time is the supervisor's own clock over windows whose outputs it snapshots; the
solution process's clocks, handlers and batching can change only the evidence or the verdict.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from kernelbench_v3.evaluate import EvalRequest, Record, evaluate
from tests.paths import EXAMPLES, TIMING_ATTACKS

pytestmark = pytest.mark.slow

SOFTMAX_SIZES = {"batch_size": 4, "dim": 96}
# attack -> the check the verdict must name, or "correct" (then it is scored at its true time)
EXPECTED = {
    "window_handler_skip": "timed_outputs",
    "window_handler_deferred": "timed_outputs",
    "timer_scaled_fast": "correct",
    "timer_scaled_slow": "correct",
    "timer_divided_30": "correct",
    "window_batched": "correct",
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
ALSO_FAILED = {"evidence_switch_profiler": "library_ops", "linear_from_stored": "timed_outputs"}
TIMER_FACTORS = {"timer_scaled_fast": 0.7, "timer_scaled_slow": 1.5, "timer_divided_30": 1 / 30}


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
        assert record.timing_method == "supervisor_windows_cpu" and record.sol_ms, where
    else:
        assert not record.correct, where
        assert record.failed_check == EXPECTED[name], where
        if name in ALSO_FAILED:
            assert record.checks[ALSO_FAILED[name]] == "fail", where


@pytest.mark.parametrize("name", sorted(TIMER_FACTORS))
def test_a_scaled_clock_changes_only_the_evidence(records, name):
    record, honest = records[name], records["honest_softmax"]
    # The process's own figure follows its clock; the scored one is the supervisor's.
    assert record.event_ms / record.sol_ms == pytest.approx(TIMER_FACTORS[name], rel=0.35), record.timing_details
    assert 0.4 < record.sol_ms / honest.sol_ms < 2.5, (record.sol_ms, honest.sol_ms)


def test_batching_a_window_does_not_score_below_one_call(records):
    record, honest = records["window_batched"], records["honest_softmax"]
    assert record.sol_ms >= 0.4 * honest.sol_ms, (record.sol_ms, honest.sol_ms, record.timing_details)
    assert "single_call_ms" in record.timing_details, record.timing_details


def test_the_probing_solution_never_took_its_library_branch(records):
    record = records["dispatch_probe_switch"]
    assert record.checks["library_ops"] == "pass" and record.correct, record.check_details
