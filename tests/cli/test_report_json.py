"""`kbv3 report --json` is data (issue 33, items 3 and 4): it follows the schema the package
ships (`runs/report.schema.json`) on the demo's records, the runs fixture and sampled records;
every figure is a number or null, never display text; `best_sample` is null where no sample is
correct; every record is a row. The text report tells samples apart, and batch progress and
failed records name their sample and where they ran as evaluated ones do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelbench_v3.cli.main import main
from kernelbench_v3.runs.report import SCHEMA_PATH
from tests.cli.test_report_samples import _write
from tests.paths import PUBLISHED, RUNS_FIXTURES

# jsonschema comes with nbformat, which requirements-ci.txt pins (the notebook's runner).
jsonschema = pytest.importorskip("jsonschema")

DEMO_RECORDS = RUNS_FIXTURES / "demo_records.jsonl"  # a real `kbv3 demo --device cpu` run's records
DISPLAY_TEXT = ("n/a", "-", "x")


def _report_json(path: Path, capsys) -> dict:
    assert main(["report", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _validate(data: dict) -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:10])


SOURCES = {
    "demo records": lambda tmp_path: DEMO_RECORDS,
    "runs fixture": lambda tmp_path: PUBLISHED / "results.csv",
    "one eval --json record": lambda tmp_path: RUNS_FIXTURES / "eval_record.json",
    "samples on GPU and CPU": _write,
}


@pytest.mark.parametrize("source", list(SOURCES))
def test_report_json_follows_the_shipped_schema(source, tmp_path, capsys):
    path = SOURCES[source](tmp_path)
    data = _report_json(path, capsys)
    _validate(data)
    figures = [v for m in data["models"] for k, v in m.items() if k not in ("speed_measured", "model", "gpu")]
    figures += [p["best_speedup"] for p in data["problems"]] + [r["speedup"] for r in data["records"]]
    assert not [v for v in figures if isinstance(v, str)], "a figure as display text"
    assert data["records"], "the per-record rows"


def test_the_schema_refuses_display_strings():
    """The schema itself is the guard: a figure as text fails it."""
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    row = {"model": "m", "gpu": "H100", "problem": "p", "samples": 1, "correct": 1, "pass@1": 1.0, "best_sample": 0}
    for shown in ("n/a", "-", "1.234x"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"models": [], "problems": [{**row, "best_speedup": shown}], "records": []}, schema)


def test_the_demo_records_are_real_cpu_records():
    records = [json.loads(line) for line in DEMO_RECORDS.read_text().splitlines()]
    assert len(records) == 6 and all(r["device"] == "cpu" and r["correct"] for r in records)
    assert all("baseline" not in r["phase_s"] for r in records)  # the CPU times no baseline (item 2)


def test_a_problem_without_a_correct_sample_has_no_best_sample(tmp_path, capsys):
    data = _report_json(_write(tmp_path), capsys)
    by_model = {p["model"]: p for p in data["problems"]}
    assert by_model["gpu-model"]["best_sample"] == 0 and by_model["gpu-model"]["best_speedup"] == 3.0
    published = _report_json(PUBLISHED / "results.csv", capsys)
    none_correct = [p for p in published["problems"] if p["correct"] == 0]
    assert none_correct and all(p["best_sample"] is None and p["best_speedup"] is None for p in none_correct)
    cpu = [r for r in data["records"] if r["model"] == "cpu-model"]
    assert cpu and all(r["speedup"] is None and r["timed_on_gpu"] is False for r in cpu)
    assert sorted(r["sample"] for r in cpu) == [0, 1]


def test_the_records_table_tells_samples_apart(tmp_path, capsys):
    assert main(["report", str(_write(tmp_path))]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("problem "))
    assert header.split()[:3] == ["problem", "model", "sample"]
    cpu_rows = [line.split() for line in out.splitlines() if " cpu-model " in f" {line} " and "correct" in line]
    assert sorted(row[2] for row in cpu_rows if row[1] == "cpu-model") == ["0", "1"]
    assert "gpu-model on H100: 2 samples of 1 problem " in out and "1 problems" not in out


def test_batch_progress_and_failures_name_the_sample_and_where_they_ran():
    from kernelbench_v3.batch.items import failure_record
    from kernelbench_v3.batch.queue import BatchItem, BatchSettings
    from kernelbench_v3.batch.run import failure_line, item_label
    from kernelbench_v3.evaluate.fingerprint import device_name

    item = BatchItem("m", "H100", "level1/23_Softmax", "", "", sample=2, missing="no code in the response")
    assert item_label(item) == "level1/23_Softmax sample 2 (m)"
    record = failure_record(item, BatchSettings(split="h100", device="cpu"), item.missing, "failed", "response")
    assert record["ran_on"] == device_name("cpu")  # `cpu:<model>`, as an evaluated record says
    assert failure_line({**record, "sample": 2}).startswith("level1/23_Softmax sample 2 (m): failed")
