"""What a user reads in a failed record (issue 22, points 3 and 10): a solution that does not
parse is an import failure with Python's message and line, and one wrong value fails
`correctness` alone, the checks that depend on it reading `not run`."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from kernelbench_v3.evaluate import EvalRequest, describe_record, evaluate
from tests.paths import BROKEN

pytestmark = pytest.mark.slow  # evaluations in child processes

SOFTMAX = {"batch_size": 4, "dim": 96}
CASES = {
    "syntax_error": BROKEN / "syntax_error.py",
    "wrong_value": BROKEN / "wrong_value_softmax.py",
}


@pytest.fixture(scope="module")
def records():
    def run(path):
        request = EvalRequest(
            "level1/23_Softmax", path, device="cpu", sizes=SOFTMAX, baseline=False, time_solution=False, seeds=(42, 123)
        )
        return evaluate(request)

    with ThreadPoolExecutor(2) as pool:
        return dict(zip(CASES, pool.map(run, CASES.values())))


def test_a_syntax_error_is_an_import_failure_with_pythons_message_and_line(records):
    rec = records["syntax_error"]
    assert rec.status == "failed" and rec.failed_check == "import"
    assert rec.checks["source_scan"] == "skip"
    assert "SyntaxError: expected ':'" in rec.error and "line 30" in rec.error
    text = describe_record(rec)
    assert "failed check: import" in text and "source_scan" not in text.split("checks:")[0]
    assert "SyntaxError: expected ':'" in text and "line 30" in text


def test_one_wrong_value_fails_correctness_and_the_dependent_checks_are_not_run(records):
    rec = records["wrong_value"]
    assert rec.status == "incorrect" and rec.failed_check == "correctness"
    failed = [name for name, outcome in rec.checks.items() if outcome == "fail"]
    assert failed == ["correctness"]
    for name in ("stress", "other_shape", "recompute", "input_reuse", "precision"):
        assert rec.checks[name] == "not run", (name, rec.checks)
        assert "correctness failed first" in rec.check_details[name]
    assert rec.checks["custom_kernel"] == "pass"  # independent evidence keeps its outcome
    assert "stress=not run" in describe_record(rec)
