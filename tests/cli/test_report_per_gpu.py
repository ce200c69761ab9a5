"""What `kbv3 report` shows, round 4 (issue 41, items 1-3): pass@k and fast_p@k per model and
GPU in every format (a problem's runs on two GPUs are two problems, never two samples), the HTML
page with the same summaries, per-problem table and record order as the terminal, and every
share with its denominator, so the report and the leaderboard agree."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from pathlib import Path

import pytest

from kernelbench_v3.cli.main import main
from tests.cli.test_report_samples import _write
from tests.paths import PUBLISHED, RUNS_FIXTURES

RESULTS = PUBLISHED / "results.csv"
DEMO_RECORDS = RUNS_FIXTURES / "demo_records.jsonl"


@pytest.fixture(autouse=True)
def no_figures(monkeypatch):
    """The page's figures stubbed: these tests read its tables, and drawing the two figures
    costs about a second per page (tests/runs/test_report.py renders them for real)."""
    from kernelbench_v3.runs import plots, report_html

    monkeypatch.setattr(plots, "fast_p_curves", lambda joined: None)
    monkeypatch.setattr(plots, "speedup_by_level", lambda joined: None)
    monkeypatch.setattr(report_html, "_figure_uri", lambda fig: "data:image/png;base64,")


def _out(argv, capsys) -> str:
    capsys.readouterr()
    assert main([str(a) for a in argv]) == 0
    return capsys.readouterr().out


# ------------------------------------------------------------------ item 1: per model and GPU


def test_json_gives_one_summary_per_model_and_gpu(capsys):
    data = json.loads(_out(["report", RESULTS, "--json"], capsys))
    model_a = {m["gpu"]: m for m in data["models"] if m["model"] == "Model A"}
    assert list(model_a) == ["RTX3090", "H100", "B200"]  # the GPU order of every table
    # Softmax ran once on the RTX3090 and once on the H100: one sample each, never two of one.
    assert (model_a["RTX3090"]["samples"], model_a["RTX3090"]["problems"]) == (4, 4)
    assert model_a["RTX3090"]["pass@1"] == 0.75 and model_a["H100"]["pass@1"] == 1.0
    assert model_a["RTX3090"]["fast_1@1"] == 0.5 and model_a["H100"]["fast_1@1"] == 0.0  # 1.0x is not above 1
    softmax = [p for p in data["problems"] if p["model"] == "Model A" and p["problem"] == "level1/23_Softmax"]
    assert [(p["gpu"], p["samples"], p["best_sample"]) for p in softmax] == [("RTX3090", 1, 0), ("H100", 1, 0)]
    records = [r for r in data["records"] if r["model"] == "Model A" and r["problem"] == "level1/23_Softmax"]
    assert [(r["split"], r["sample"]) for r in records] == [("RTX3090", 0), ("H100", 0)]


def test_terminal_and_csv_give_one_line_per_model_and_gpu(capsys):
    out = _out(["report", RESULTS], capsys)
    assert "Model A:" not in out  # no pooled line
    assert "Model A on RTX3090: 4 samples of 4 problems (1 each)" in out
    assert "Model A on H100: 1 sample of 1 problem (1 each)" in out
    rows = list(csv.DictReader(io.StringIO(_out(["report", RESULTS, "--csv"], capsys))))
    assert [(r["model"], r["gpu"]) for r in rows if r["model"] == "Model A"] == [
        ("Model A", "RTX3090"), ("Model A", "H100"), ("Model A", "B200")
    ]  # fmt: skip
    assert {r["model"] for r in rows} == {"Delta", "Epsilon", "Gamma", "Model A", "Model_B v2", "Zeta"}


# ------------------------------------------------------------------ item 2: the HTML page


def _html_table(page: str, table_id: str) -> list[list[str]]:
    body = re.search(rf'<table id="{table_id}">(.*?)</table>', page, re.S)
    assert body, f"no table {table_id}"
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body.group(1), re.S)
    return [[html.unescape(c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)] for row in rows]


def _terminal_records(out: str) -> list[tuple[str, str, str, str]]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("problem "))
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line)
        rows.append((cells[0], cells[1], cells[2], cells[3]))  # problem, model, sample, split
    return rows


def test_the_html_page_has_pass_at_k_the_problem_table_and_the_terminals_order(tmp_path, capsys):
    results = _write(tmp_path)  # two samples of one problem: the per-problem table is shown
    page_path = tmp_path / "report.html"
    out = _out(["report", results, "--html", page_path], capsys)
    page = page_path.read_text()
    summaries = _html_table(page, "summaries")
    assert summaries[0][:2] == ["model", "gpu"] and {"pass@1", "pass@2", "fast_1@1", "fast_2@2"} <= set(summaries[0])
    by_model = {row[0]: dict(zip(summaries[0], row)) for row in summaries[1:]}
    assert by_model["gpu-model"]["pass@1"] == "0.5" and by_model["cpu-model"]["fast_1@1"] == "n/a"
    problems = _html_table(page, "problems")
    assert problems[0][:3] == ["model", "GPU", "problem"] and len(problems) == 3
    records = _html_table(page, "records")
    assert [tuple(r[:4]) for r in records[1:]] == _terminal_records(out)
    # The runs fixture, one sample per problem: the problem table all the same, in both views
    # (the same parts everywhere), and the same order again.
    out = _out(["report", RESULTS, "--html", page_path], capsys)
    page = page_path.read_text()
    problems = _html_table(page, "problems")
    assert len(problems) == 1 + 21 and "best sample" in out
    assert [tuple(r[:4]) for r in _html_table(page, "records")[1:]] == _terminal_records(out)
    lines = re.findall(r'<p class="line">(.*?)</p>', page)
    assert [html.unescape(line) for line in lines] == [line for line in out.splitlines() if " on " in line][
        : len(lines)
    ]


# ------------------------------------------------------------------ item 3: denominators


def test_every_share_names_its_denominator_and_the_views_agree(tmp_path, capsys):
    out = _out(["report", DEMO_RECORDS, "--html", tmp_path / "r.html"], capsys)
    assert "correct 6/6 samples (100.0%)" in out and "solved 6/54 of the H100 split's problems" in out
    assert "means over the 6 problems attempted: pass@1 1.000" in out
    board = _html_table((tmp_path / "r.html").read_text(), "leaderboard")
    row = dict(zip(board[0], board[1]))
    assert row["correct/split"] == "6/54" and "correct" not in board[0]  # the same count as "solved"
    assert "problems in that GPU&#39;s split" in (tmp_path / "r.html").read_text()
    summary = _out(["runs", "summary", "--source", DEMO_RECORDS], capsys)
    assert re.search(r"correct/split.*\n\s*bundled-example\s+6/54", summary)
    assert "correct/split: problems with a correct run / problems in that GPU's split" in summary
    data = json.loads(_out(["report", DEMO_RECORDS, "--json"], capsys))
    (model,) = data["models"]
    assert (model["correct"], model["samples"], model["solved"], model["split_problems"]) == (6, 6, 6, 54)
    problems = _out(["report", _write(Path(tmp_path))], capsys)
    assert "correct/samples" in problems
    assert re.search(r"^gpu-model\s+H100\s+level1/23_Softmax\s+2\s+1/2\s", problems, re.M)
