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


def test_a_record_without_the_wall_fields_reads_back_empty_and_with_them_in_order():
    old = Record.from_dict({"problem_id": "a/b", "duration_s": 3.0, "phase_s": {"reference": 1.0}})
    assert old.wall_s is None and old.wall_phase_s == {} and old.wall_background_s == {}
    rec = Record(wall_s=2.0, wall_phase_s={"cli_import": 0.5, "reference": 1.5, "unattributed": 0.0})
    back = Record.from_json(rec.to_json())
    assert list(back.wall_phase_s) == ["cli_import", "reference", "unattributed"] and back.wall_s == 2.0
