"""A solution that hangs fails within a minute by default: each step's limit is derived from the
problem (the reference's time per case), not a fixed long timeout."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from kernelbench_v3.evaluate import EvalRequest, evaluate
from kernelbench_v3.evaluate.supervisor.run import step_limits
from tests.paths import ATTACKS

HANGS = ("busy_loop_forever", "sigterm_ignore_sleep", "sleep_at_import")


@pytest.mark.slow
def test_hangs_end_in_a_failure_within_a_minute_by_default(tmp_path):
    def run(name):
        request = EvalRequest(
            "level1/23_Softmax",
            ATTACKS / f"{name}.py",
            device="cpu",
            sizes={"batch_size": 4, "dim": 96},
            baseline=False,
            scan_source=False,
        )
        started = time.monotonic()
        return name, evaluate(request, cache_dir=tmp_path), time.monotonic() - started

    with ThreadPoolExecutor(max_workers=len(HANGS)) as pool:
        for name, record, seconds in pool.map(run, HANGS):
            assert not record.correct and record.failed_check == "process", (name, record.error)
            assert "timed out" in record.check_details["process"], (name, record.check_details)
            assert seconds < 60, f"{name} took {seconds:.0f} s"


def test_step_limits_follow_the_reference_unless_a_timeout_is_given():
    quick = step_limits(EvalRequest("p", "s", device="cpu"), reference_s=1.0, cases=10)
    slow = step_limits(EvalRequest("p", "s", device="cpu"), reference_s=30.0, cases=10)
    assert quick.setup <= 30 and quick.case < 20 and slow.case > quick.case  # 20x the reference's case
    cuda = step_limits(EvalRequest("p", "s", device="cuda"), reference_s=1.0, cases=10)
    assert cuda.first_case > cuda.case  # the first call compiles
    given = step_limits(EvalRequest("p", "s", device="cpu", timeout_s=90.0), reference_s=1.0, cases=10)
    assert (given.setup, given.case, given.first_case, given.window) == (90.0, 90.0, 90.0, 90.0)
