"""What `kbv3 report`, `kbv3 runs summary` and `kbv3 runs anomalies` show (issue 29, points
1-3, 12, 13): no figure where none exists (n/a, never 0 or nan), the report and the leaderboard
read one speed-of-light fraction, anomalies are flagged where the row is shown, the table says
where a run ran, and a path that cannot be written fails before anything is printed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from kernelbench_v3.cli.main import main
from tests.paths import PUBLISHED, RUNS_FIXTURES

TEMPLATE = json.loads((RUNS_FIXTURES / "eval_record.json").read_text())
CPU_PROBLEMS = [("level1/23_Softmax", "softmax"), ("level1/26_GELU_", "gelu"), ("level1/40_LayerNorm", "layernorm")]


def cpu_records(tmp_path: Path, repeat: int = 1) -> Path:
    """The demo's records on a machine without a GPU: correct, timed on the CPU, no speedup."""
    records = [
        {
            **TEMPLATE,
            "model": "bundled-example",
            "problem_id": pid,
            "problem": pid.split("/")[1] + ".py",
            "op_type": op,
            "speedup": None,
            "ref_ms": None,
            "baseline_ms": None,
            "sol_fraction": None,
            "timing_meaningful": False,
            "ran_on": "cpu:AMD EPYC 7B13",
        }
        for pid, op in CPU_PROBLEMS
    ]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records * repeat))
    return path


def run(argv, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---------------------------------------------------------------- point 1: n/a, never 0 or nan


def test_leaderboard_of_cpu_records_has_no_fast_p_above_zero(tmp_path):
    from kernelbench_v3.runs.leaderboard import fast_p, leaderboard
    from kernelbench_v3.runs.report import load_report

    _, joined, _ = load_report(cpu_records(tmp_path))
    board = leaderboard(joined)
    row = board.iloc[0]
    assert row["fast_0"] == pytest.approx(3 / 54)
    assert all(np.isnan(row[c]) for c in ("fast_1", "fast_1.5", "fast_2", "geomean_speedup", "mean_sol_fraction"))
    curve = fast_p(joined, [0.0, 0.05, 1.0])
    assert curve["fast_p"].iloc[0] > 0 and curve["fast_p"].iloc[1:].isna().all()


def test_runs_summary_of_cpu_records_prints_na_and_no_raw_empty_frame(tmp_path, capsys):
    code, out, _ = run(["runs", "summary", "--source", cpu_records(tmp_path)], capsys)
    assert code == 0
    row = next(line for line in out.splitlines() if line.strip().startswith("bundled-example"))
    cells = row.split()
    assert cells[1:4] == ["3/54", "3", "n/a"] and cells[4] == "0.0556" and cells[5:8] == ["n/a"] * 3
    assert "Empty DataFrame" not in out and "Columns:" not in out and "NaN" not in out
    assert "no correct run has a speedup" in out and "count for correctness only" in out


def test_runs_anomalies_prints_na_for_a_missing_speedup(tmp_path, capsys):
    code, out, _ = run(["runs", "anomalies", "--source", cpu_records(tmp_path)], capsys)
    assert code == 0
    assert "nanx" not in out and "nan" not in out.lower().replace("near_identity", "")
    assert "speedup n/a" in out  # 40_LayerNorm is near-identity: flagged, without a speedup


def test_report_of_cpu_records_says_na_everywhere_and_why(tmp_path, capsys):
    page = tmp_path / "report.html"
    code, out, _ = run(["report", cpu_records(tmp_path), "--html", page], capsys)
    assert code == 0
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("problem "))  # after the summary
    for line in lines[start + 1 : start + 4]:
        assert "n/a on CPU" in line and line.split()[-1] == "n/a"  # speedup and SOL
    text = page.read_text()
    board = text[text.index('id="leaderboard"') :]
    board = board[: board.index("</table>")]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", board)
    assert cells[cells.index("3/54") + 2] == "n/a"  # geomean
    assert cells[cells.index("3/54") + 4 : cells.index("3/54") + 7] == ["n/a"] * 3  # fast_1, 1.5, 2
    assert ">0<" not in board and "NaN" not in board and ">-<" not in board
    assert "count for correctness only" in text and "tests the machinery" in text


# ---------------------------------------------------------------- point 2: one SOL, flags shown


def test_report_sol_column_agrees_with_the_leaderboard_on_the_published_fixture(capsys):
    from kernelbench_v3.runs.leaderboard import leaderboard
    from kernelbench_v3.runs.report import load_report, report_table

    _, joined, flags = load_report(PUBLISHED / "results.csv")
    table = report_table(joined, flags)
    board = leaderboard(joined)
    assert (table["sol_fraction"] != "n/a").sum() >= 14  # not `-` on every row
    h100_zeta = table[(table["model"] == "Zeta") & (table["split"] == "H100")].iloc[0]
    zeta = board[(board["model"] == "Zeta") & (board["gpu"] == "H100")].iloc[0]
    assert h100_zeta["sol_fraction"] == f"{zeta['mean_sol_fraction']:.1%}"  # the same figure, both views
    assert "faster_than_light" in h100_zeta["flags"]


def test_report_terminal_flags_the_faster_than_light_row_with_its_reason(capsys):
    code, out, _ = run(["report", PUBLISHED / "results.csv"], capsys)
    assert code == 0
    zeta = next(line for line in out.splitlines() if " Zeta " in line and "H100" in line)
    assert "faster_than_light" in zeta
    assert re.search(r"Zeta, H100\) faster_than_light: sol_ms .* faster than physically possible", out)


# ---------------------------------------------------------------- point 3: where it ran


def test_report_names_the_split_and_the_device_it_ran_on(tmp_path, capsys):
    code, out, _ = run(["report", cpu_records(tmp_path)], capsys)
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("problem "))  # after the summary
    assert lines[start].split()[:6] == ["problem", "model", "sample", "split", "ran", "on"]
    assert "cpu:AMD EPYC 7B13" in lines[start + 1]
    code, out, _ = run(["report", PUBLISHED / "results.csv"], capsys)
    bloom = next(line for line in out.splitlines() if line.startswith("graphics/bloom"))
    assert bloom.split()[4:6] == ["RTX3090", "RTX3090"]  # a published run ran on its split's GPU


# ---------------------------------------------------------------- point 12, 13


def test_report_html_into_a_missing_folder_is_made_or_fails_before_the_table(tmp_path, capsys):
    page = tmp_path / "missing" / "dir" / "r.html"
    code, out, err = run(["report", cpu_records(tmp_path), "--html", page], capsys)
    assert code == 0 and page.is_file() and err == ""
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, out, err = run(["report", cpu_records(tmp_path), "--html", blocker / "r.html"], capsys)
    assert code == 2 and out == "" and "--html" in err


def test_report_says_when_a_rerun_superseded_records(tmp_path, capsys):
    code, out, _ = run(["report", cpu_records(tmp_path, repeat=2)], capsys)
    assert code == 0 and "3 record(s): 3 correct" in out
    assert "3 earlier record(s) of the same model, split and problem" in out


def test_report_of_a_folder_says_it_is_a_folder(tmp_path, capsys):
    code, _, err = run(["report", tmp_path], capsys)
    assert code == 2 and "is a folder, not a file" in err


def test_report_help_names_csv(capsys):
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    assert ".csv" in capsys.readouterr().out


def test_the_html_page_escapes_what_a_record_says(tmp_path):
    """Point 16: the page comes from a Jinja2 template with autoescape, not joined strings."""
    import pandas as pd

    from kernelbench_v3.runs.report_html import html_page

    runs = pd.DataFrame(
        [
            {
                "problem_id": "level1/23_Softmax",
                "model": "<b>m</b>",
                "gpu": "H100",
                "status": "failed",
                "correct": False,
                "failed_check": "import",
                "error": "<script>alert(1)</script>",
            }
        ]
    )
    page = html_page(runs, title="t & <u>")
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;m&lt;/b&gt;" in page and "<title>t &amp; &lt;u&gt;</title>" in page
