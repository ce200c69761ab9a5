"""Children run by `isolate` with a wall-clock limit and a bounded log."""

from __future__ import annotations

import pytest

from kernelbench_v3.evaluate.supervisor.reference.isolate import run_child


@pytest.mark.slow
def test_isolated_child_reports_a_bad_role(tmp_path):
    outcome = run_child("no_such_role", tmp_path, {}, timeout_s=60)
    assert (
        outcome.result is not None and outcome.result["ok"] is False and "unknown child role" in outcome.result["error"]
    )
