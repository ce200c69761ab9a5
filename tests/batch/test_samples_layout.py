"""eval-batch over the samples layout `kbv3 generate` writes: every sample is one record carrying
`model` and `sample`, a sample without code is a failed record (never dropped, never evaluated),
two samples with the same code are two records, and a regenerated sample replaces its old one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelbench_v3.batch.items import failure_record
from kernelbench_v3.batch.journal import latest_records, read_journal
from kernelbench_v3.batch.run import (
    BatchError,
    BatchItem,
    BatchSettings,
    UnknownSolutionError,
    discover_solutions,
    read_results,
    run_batch,
)
from kernelbench_v3.evaluate.options import EvalOptions
from kernelbench_v3.runs.sample_files import SampleEntry, write_manifest
from tests.paths import PROBLEMS

SOFTMAX, GELU = "level1/23_Softmax", "level1/26_GELU_"
SETTINGS = BatchSettings(split="h100", device="cpu", problems_root=str(PROBLEMS), options=EvalOptions(timeout_s=5.0))


def _samples(folder: Path, entries: list[tuple[str, int, str | None]], model: str = "org/model-1") -> Path:
    """entries: (problem, sample, code or None for a sample without code)."""
    rows = []
    for problem, sample, code in entries:
        if code is None:
            rows.append(SampleEntry(problem, sample, None, "no solution in the response: no fenced code block"))
            continue
        name = f"{problem}/sample_{sample}.py"
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(code)
        rows.append(SampleEntry(problem, sample, name))
    write_manifest(folder, model, "h100", rows)
    return folder


def evaluate_by_text(item: BatchItem, settings: BatchSettings) -> dict:
    """Stands in for the evaluator: the file's text says the verdict."""
    good = "GOOD" in Path(item.solution_path).read_text()
    record = failure_record(item, settings, "placeholder")
    record.update(status="correct" if good else "incorrect", correct=good, error=None if good else "wrong values")
    return record


def test_discovery_keeps_every_sample_apart_even_with_equal_code(tmp_path):
    folder = _samples(tmp_path / "s", [(SOFTMAX, 0, "GOOD"), (SOFTMAX, 1, "GOOD"), (GELU, 0, None), (GELU, 1, "BAD")])
    items = discover_solutions(folder, "h100", PROBLEMS).items
    assert [(it.problem_id, it.sample) for it in items] == [(SOFTMAX, 0), (SOFTMAX, 1), (GELU, 0), (GELU, 1)]
    assert {it.model for it in items} == {"org/model-1"}
    assert items[0].solution_sha256 == items[1].solution_sha256 and items[0].key != items[1].key
    assert items[2].missing.startswith("no solution") and items[2].solution_path == ""
    assert discover_solutions(folder, "h100", PROBLEMS, model="renamed").items[0].model == "renamed"


def test_a_bad_manifest_names_the_file_the_row_and_the_field(tmp_path):
    folder = _samples(tmp_path / "s", [(SOFTMAX, 0, "GOOD")])
    with pytest.raises(BatchError, match="generated for split h100, the batch is for b200"):
        discover_solutions(folder, "b200", PROBLEMS)
    data = json.loads((folder / "samples.json").read_text())
    data["samples"].append({"problem_id": SOFTMAX, "sample": -1, "file": None, "reason": "x"})
    (folder / "samples.json").write_text(json.dumps(data))
    with pytest.raises(BatchError, match=r"samples.json: samples\[1\]: field 'sample' must be a whole number"):
        discover_solutions(folder, "h100", PROBLEMS)
    data["samples"][1] = {"problem_id": SOFTMAX, "sample": 1, "file": "level1/23_Softmax/sample_9.py", "reason": ""}
    (folder / "samples.json").write_text(json.dumps(data))
    with pytest.raises(BatchError, match=r"samples\[1\]: field 'file': .*sample_9.py does not exist"):
        discover_solutions(folder, "h100", PROBLEMS)
    data["samples"][1] = {"problem_id": "level1/23_Sofmax", "sample": 1, "file": None, "reason": "x"}
    (folder / "samples.json").write_text(json.dumps(data))
    with pytest.raises(UnknownSolutionError, match="did you mean level1/23_Softmax"):
        discover_solutions(folder, "h100", PROBLEMS)


def test_a_regenerated_sample_replaces_its_old_record():
    def rec(sha: str, sample: int | None, status: str) -> dict:
        return {"model": "m", "gpu": "H100", "problem_id": SOFTMAX, "solution_sha256": sha, "sample": sample,
                "status": status}  # fmt: skip

    latest = latest_records([rec("", 0, "failed"), rec("a", 1, "correct"), rec("b", 0, "correct")])
    assert sorted((r["sample"], r["solution_sha256"]) for r in latest.values()) == [(0, "b"), (1, "a")]
    # outside the samples layout every file keeps its record, as before
    legacy = [{k: v for k, v in rec(sha, None, "correct").items() if k != "sample"} for sha in "ab"]
    assert len(latest_records(legacy)) == 2


@pytest.mark.slow  # spawns a worker process
def test_a_batch_records_every_sample_with_model_and_sample(tmp_path):
    folder = _samples(tmp_path / "s", [(SOFTMAX, 0, "GOOD"), (SOFTMAX, 1, "GOOD"), (GELU, 0, None), (GELU, 1, "BAD")])
    out = tmp_path / "results.parquet"
    result = run_batch(folder, out, SETTINGS, evaluate_fn=evaluate_by_text, progress=False)
    assert result.ran == 3  # the sample without code is recorded, not evaluated
    rows = {(r["problem_id"], r["sample"]): r for r in read_results(out)}
    assert len(rows) == 4 and {r["model"] for r in rows.values()} == {"org/model-1"}
    assert rows[(SOFTMAX, 0)]["correct"] and rows[(SOFTMAX, 1)]["correct"]
    assert rows[(GELU, 0)]["status"] == "failed" and rows[(GELU, 0)]["failed_check"] == "response"
    assert rows[(GELU, 0)]["error"].startswith("no solution") and rows[(GELU, 1)]["status"] == "incorrect"

    again = run_batch(folder, out, SETTINGS, evaluate_fn=evaluate_by_text, progress=False)
    assert again.ran == 0 and again.already_done == 4

    _samples(folder, [(SOFTMAX, 0, "GOOD"), (SOFTMAX, 1, "GOOD"), (GELU, 0, "GOOD now"), (GELU, 1, "BAD")])
    third = run_batch(folder, out, SETTINGS, evaluate_fn=evaluate_by_text, progress=False)
    assert third.ran == 1
    rows = {(r["problem_id"], r["sample"]): r for r in read_results(out)}
    assert len(rows) == 4 and rows[(GELU, 0)]["correct"]  # the old failed record is gone from the results
    assert len(read_journal(tmp_path / "results.parquet.journal.jsonl")[1]) == 5  # but kept in the journal


def test_the_samples_of_a_problem_go_to_one_worker_in_turn(tmp_path):
    from kernelbench_v3.batch.queue import WorkQueue

    folder = _samples(tmp_path / "s", [(p, k, f"code {p} {k}") for p in (SOFTMAX, GELU) for k in range(3)])
    queue = WorkQueue(discover_solutions(folder, "h100", PROBLEMS).items)
    first = queue.take()
    assert (first.problem_id, first.sample) == (SOFTMAX, 0)
    assert queue.take().problem_id == GELU  # Softmax's reference and baseline are being built once
    queue.finish(first, {})
    group = (SOFTMAX, "H100")
    taken = [queue.take(prefer=group) for _ in range(2)]
    assert [(it.problem_id, it.sample) for it in taken] == [(SOFTMAX, 1), (SOFTMAX, 2)]
