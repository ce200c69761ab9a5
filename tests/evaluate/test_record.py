"""`Record`: the result schema, its named checks and its JSON round trip."""

from __future__ import annotations

import json

import pytest

from kernelbench_v3.evaluate import Record


def test_record_checks_keep_the_first_failure_and_round_trip():
    rec = Record(problem_id="a/b")
    rec.check("state_dict", "pass")
    rec.check("correctness", "fail", "seed42: too far")
    rec.check("stress", "fail", "later")
    assert rec.failed_check == "correctness"
    rec.sol_ms = float("nan")
    data = json.loads(rec.to_json())
    assert data["sol_ms"] is None and data["checks"]["stress"] == "fail"
    assert Record.from_dict({**data, "a_future_column": 1}).failed_check == "correctness"
    with pytest.raises(ValueError):
        rec.check("x", "maybe")
