"""`kbv3 report` over samples: the per-model summary first (pass@k, fast_p@k, geometric-mean
speedup), in the terminal, as `--json` (a `models` mapping) and as `--csv`; n/a on CPU."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from kernelbench_v3.cli.main import main
from tests.paths import RUNS_FIXTURES

TEMPLATE = json.loads((RUNS_FIXTURES / "eval_record.json").read_text())


def _write(tmp_path: Path) -> Path:
    rows = []
    for sample, (correct, speedup) in enumerate([(True, 3.0), (False, None)]):
        rows.append(
            {**TEMPLATE, "model": "gpu-model", "device": "cuda", "timing_meaningful": correct or None,
             "timing_method": "supervisor_calls_cuda_graphs" if correct else "",
             "correct": correct, "status": "correct" if correct else "incorrect", "speedup": speedup, "sample": sample}
        )  # fmt: skip
    for sample in range(2):
        rows.append({**TEMPLATE, "model": "cpu-model", "device": "cpu", "timing_meaningful": False, "sample": sample})
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_json_has_a_models_mapping_with_pass_and_fast_keys(tmp_path, capsys):
    assert main(["report", str(_write(tmp_path)), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    by_model = {m["model"]: m for m in data["models"]}
    gpu, cpu = by_model["gpu-model"], by_model["cpu-model"]
    assert (gpu["samples"], gpu["problems"], gpu["pass@1"], gpu["pass@2"]) == (2, 1, 0.5, 1.0)
    assert gpu["fast_1@1"] == 0.5 and gpu["fast_2@2"] == 1.0 and gpu["geomean_speedup"] == pytest.approx(3.0)
    assert cpu["pass@1"] == 1.0 and cpu["fast_1@1"] is None and cpu["geomean_speedup"] is None  # n/a, never 0
    assert {p["model"] for p in data["problems"]} == {"gpu-model", "cpu-model"}


def test_csv_is_the_same_summary_as_a_table(tmp_path, capsys):
    assert main(["report", str(_write(tmp_path)), "--csv"]) == 0
    rows = {r["model"]: r for r in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert rows["gpu-model"]["pass@1"] == "0.5" and rows["gpu-model"]["fast_1@1"] == "0.5"
    assert rows["cpu-model"]["fast_1.5@2"] == "n/a" and rows["cpu-model"]["geomean_speedup"] == "n/a"


def test_the_terminal_report_starts_with_the_summary_then_problems_best_sample_first(tmp_path, capsys):
    assert main(["report", str(_write(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert (
        out.index("gpu-model on H100: 2 samples of 1 problem ") < out.index("best sample") < out.index("failed check")
    )
    assert "cpu-model" in out and "speed figures n/a on CPU" in out
    with pytest.raises(SystemExit) as exit_:
        main(["report", str(_write(tmp_path)), "--json", "--csv"])  # one format at a time
    assert exit_.value.code == 2
