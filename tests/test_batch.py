"""Batch evaluation: solution discovery, the durable journal, the work order, the executors.

The machinery tests run in well under a second each. The batch tests run the real evaluator on
CPU over small problems at reduced sizes: a batch of honest, cheating, crashing and hanging
solutions is started as `kbv3 eval-batch`, SIGKILLed (with its whole process group) after a few
records are journaled, and rerun; every record must then be there exactly once with the right
verdict. The Ray executor (in-process, CPU) must give the same verdicts as the local one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelbench_v3.batch import (
    BatchError,
    BatchItem,
    BatchSettings,
    Journal,
    WorkQueue,
    discover_solutions,
    latest_records,
    read_journal,
    read_results,
    run_batch,
    write_parquet,
)
from kernelbench_v3.catalog import discover
from kernelbench_v3.executors import failure_record

REPO = Path(__file__).resolve().parent.parent
PROBLEMS = REPO / "problems"


# ----------------------------------------------------------------------------- discovery


def _touch(path: Path, text: str = "class Model: pass\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_runs_layout_names_resolve_with_underscores_hyphens_and_gpu_tokens(tmp_path):
    _touch(tmp_path / "claude-opus-4_H100_40_LayerNorm.py.txt")
    _touch(tmp_path / "my_odd_model_H100_1_Square_matrix_multiplication_.py.txt")
    # A GPU token inside the model name: only the split that leaves a real problem counts.
    _touch(tmp_path / "gpt_B200_tuned_H100_23_Softmax.py.txt")
    _touch(tmp_path / "GPT-5.4_B200_23_Softmax.py.txt")  # another GPU: skipped
    _touch(tmp_path / "GPT-5.4_H100_bloom.py.txt")  # graphics is not in h100: skipped
    found = discover_solutions(tmp_path, "h100", PROBLEMS)
    got = {(it.model, it.gpu, it.problem_id) for it in found.items}
    assert got == {
        ("claude-opus-4", "H100", "level1/40_LayerNorm"),
        ("my_odd_model", "H100", "level1/1_Square_matrix_multiplication_"),
        ("gpt_B200_tuned", "H100", "level1/23_Softmax"),
    }
    reasons = sorted(s.reason for s in found.skipped)
    assert reasons == ["graphics/bloom is not in split h100", "solution for B200, batch is for H100"]
    # batch order follows the catalog (level1/1 before 23 before 40)
    assert [it.problem_id for it in found.items] == [
        "level1/1_Square_matrix_multiplication_", "level1/23_Softmax", "level1/40_LayerNorm",
    ]


def test_problems_layout_and_unknown_files_are_errors_naming_them(tmp_path):
    folder = tmp_path / "agent-x"
    _touch(folder / "level1" / "40_LayerNorm.py")
    _touch(folder / "graphics" / "bloom.py")
    found = discover_solutions(folder, "h100", PROBLEMS)
    assert [(it.model, it.problem_id) for it in found.items] == [("agent-x", "level1/40_LayerNorm")]
    assert found.items[0].solution_sha256 == __import__("hashlib").sha256(
        (folder / "level1" / "40_LayerNorm.py").read_bytes()).hexdigest()
    assert discover_solutions(folder, "h100", PROBLEMS, model="m").items[0].model == "m"

    _touch(folder / "level1" / "40_LayerNrom.py")
    _touch(tmp_path / "agent-x" / "someone_H100_no_such_problem.py.txt")
    with pytest.raises(BatchError) as info:
        discover_solutions(folder, "h100", PROBLEMS)
    assert "40_LayerNrom.py" in str(info.value) and "no_such_problem" in str(info.value)
    with pytest.raises(BatchError, match="no solutions"):
        discover_solutions(_touch(tmp_path / "empty" / "README.md").parent, "h100", PROBLEMS)


# ----------------------------------------------------------------------------- journal


SETTINGS = BatchSettings(split="h100", device="cpu", sizes="reduced", timeout_s=5.0,
                         problems_root=str(PROBLEMS))


def _item(problem: str, model: str = "m", sha: str = "0" * 64) -> BatchItem:
    return BatchItem(model, "H100", problem, f"/x/{problem}.py", sha)


def _record(item: BatchItem, status: str = "correct", **extra) -> dict:
    record = failure_record(item, SETTINGS, "placeholder")
    record.update(status=status, error=None, correct=status == "correct", **extra)
    return record


def test_journal_is_durable_line_by_line_and_repairs_a_torn_tail(tmp_path):
    path = tmp_path / "j.jsonl"
    first, second = _item("level1/23_Softmax"), _item("level1/26_GELU_")
    with Journal(path, SETTINGS) as journal:
        journal.append(_record(first))
    # a kill in the middle of a write leaves half a line behind
    with open(path, "ab") as f:
        f.write(b'{"model": "m", "gpu": "H1')
    header, records, _ = read_journal(path)
    assert header["settings"]["sizes"] == "reduced" and len(records) == 1
    with Journal(path, SETTINGS) as journal:
        assert [r["problem_id"] for r in journal.existing] == ["level1/23_Softmax"]
        journal.append(_record(second))
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line) for line in lines)

    # corruption anywhere but the tail is reported with its line number
    path.write_text(lines[0] + "\nnot json\n" + lines[2] + "\n")
    with pytest.raises(BatchError, match=r"j.jsonl:2: corrupt"):
        read_journal(path)


def test_journal_refuses_other_settings_and_a_second_writer(tmp_path):
    path = tmp_path / "j.jsonl"
    with Journal(path, SETTINGS):
        with pytest.raises(BatchError, match="in use by another running batch"):
            Journal(path, SETTINGS).open()
    other = BatchSettings(split="h100", device="cpu", sizes="default", timeout_s=5.0,
                          problems_root=str(PROBLEMS))
    with pytest.raises(BatchError, match="other settings.*sizes"):
        Journal(path, other).open()
    Journal(path, SETTINGS).open()  # the refused attempts released the lock


def test_parquet_round_trip_and_last_record_per_key_wins(tmp_path):
    item = _item("level1/40_LayerNorm")
    records = [
        _record(item, "error"),
        _record(item, "correct", checks={"shape": "pass"}, sizes={"dim1": 16}, ref_ms=1.5),
        _record(_item("level1/23_Softmax"), "incorrect", checks={"values": "fail"}),
    ]
    latest = latest_records(records)
    assert len(latest) == 2 and latest[item.key]["status"] == "correct"
    write_parquet(latest.values(), tmp_path / "r.parquet")
    back = {(r["problem_id"]): r for r in read_results(tmp_path / "r.parquet")}
    assert back["level1/40_LayerNorm"]["checks"] == {"shape": "pass"}
    assert back["level1/40_LayerNorm"]["sizes"] == {"dim1": 16}
    assert back["level1/40_LayerNorm"]["ref_ms"] == 1.5
    assert back["level1/23_Softmax"]["speedup"] is None


# ----------------------------------------------------------------------------- work order


def test_work_queue_builds_each_baseline_once_before_sharing_it():
    a1, a2, b1 = _item("level1/23_Softmax", "m1"), _item("level1/23_Softmax", "m2"), \
        _item("level1/26_GELU_", "m1")
    queue = WorkQueue([a1, a2, b1])
    assert queue.take() == a1
    assert queue.take() == b1  # a2 waits: a1 is building the Softmax baseline
    assert queue.take() is None and not queue.finished()
    queue.finish(a1, {"baseline_ms": 2.0})
    assert queue.take() == a2
    queue.finish(a2, {})
    queue.finish(b1, {})
    assert queue.finished()

    # a first evaluation that produced no baseline hands the job to the next one
    queue = WorkQueue([a1, a2, b1])
    queue.take(), queue.take()
    queue.finish(a1, {"baseline_ms": None, "ref_ms": None})
    assert queue.take() == a2 and queue.take() is None
    # problems whose baseline a previous run already built start in parallel
    queue = WorkQueue([a1, a2], warm=[("level1/23_Softmax", "H100")])
    assert [queue.take(), queue.take()] == [a1, a2]


# ----------------------------------------------------------------------------- worker failures


def fake_evaluate(item: BatchItem, settings: BatchSettings) -> dict:
    """Stands in for the evaluator where the evaluator itself is what fails."""
    text = Path(item.solution_path).read_text()
    if "EXIT" in text:
        os._exit(3)  # the worker process dies
    if "STALL" in text:
        time.sleep(600)  # the evaluator hangs past the batch watchdog
    if "RAISE" in text:
        raise RuntimeError("evaluator bug")
    return _record(item, "correct", ref_ms=1.0, baseline_ms=1.0,
                   log_tail=os.environ.get("CUDA_VISIBLE_DEVICES", "unset"))


def test_dead_stuck_or_raising_evaluator_costs_only_its_own_record(tmp_path, monkeypatch):
    import kernelbench_v3.executors as executors

    monkeypatch.setattr(executors, "WATCHDOG_SLACK_S", 3.0)
    folder = tmp_path / "fake"
    _touch(folder / "level1" / "23_Softmax.py", "EXIT")
    _touch(folder / "level1" / "26_GELU_.py", "STALL")
    _touch(folder / "level1" / "36_RMSNorm_.py", "RAISE")
    for name in ("40_LayerNorm", "42_Max_Pooling_2D", "47_Sum_reduction_over_a_dimension"):
        _touch(folder / "level1" / f"{name}.py", "fine")
    settings = BatchSettings(split="h100", device="cpu", timeout_s=0.5, problems_root=str(PROBLEMS))
    result = run_batch(folder, tmp_path / "out.parquet", settings, workers=2,
                       evaluate_fn=fake_evaluate, progress=False)
    by_problem = {r["problem_id"].split("/")[1]: r for r in result.records}
    assert "died (exit code 3)" in by_problem["23_Softmax"]["error"]
    assert "watchdog" in by_problem["26_GELU_"]["error"]
    assert "evaluator raised" in by_problem["36_RMSNorm_"]["error"]
    assert {r["status"] for k, r in by_problem.items()
            if k not in ("23_Softmax", "26_GELU_", "36_RMSNorm_")} == {"correct"}
    assert all(r["log_tail"] == "" for r in result.records if r["status"] == "correct")  # CPU: no GPU
    assert len(read_results(tmp_path / "out.parquet")) == 6

    # --retry-errors reruns exactly the three error records; the Parquet keeps one per key
    again = run_batch(folder, tmp_path / "out.parquet", settings, workers=2,
                      evaluate_fn=fake_evaluate, progress=False, retry_errors=True)
    assert again.ran == 3 and again.already_done == 3
    assert len(read_journal(tmp_path / "out.parquet.journal.jsonl")[1]) == 9
    assert len(read_results(tmp_path / "out.parquet")) == 6
