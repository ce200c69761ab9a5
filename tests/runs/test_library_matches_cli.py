"""The README's library calls give the numbers `kbv3 runs` prints (issue 22, point 1)."""

from __future__ import annotations

import json
import warnings

import pytest

from kernelbench_v3 import join_runs, load_runs
from kernelbench_v3.cli.main import main
from kernelbench_v3.runs.anomalies import flag_anomalies
from kernelbench_v3.runs.leaderboard import leaderboard
from tests.paths import RUNS_FIXTURES

FIXTURE = RUNS_FIXTURES / "published_schema_fixture"


def _cli_json(capsys, *argv) -> dict:
    capsys.readouterr()
    assert main(["runs", *argv, "--source", str(FIXTURE), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def joined():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return join_runs(load_runs(FIXTURE))


def test_leaderboard_of_join_runs_counts_the_whole_split(joined, capsys):
    board = leaderboard(joined)
    row = board[(board["gpu"] == "RTX3090") & (board["model"] == "Model A")].iloc[0]
    assert row["correct_str"] == "3/43" and row["fast_0"] == pytest.approx(3 / 43)
    cli = _cli_json(capsys, "summary")["leaderboard"]
    assert [(r["gpu"], r["model"], r["correct_str"]) for r in cli] == list(
        zip(board["gpu"], board["model"], board["correct_str"])
    )
    assert [r["fast_0"] for r in cli] == pytest.approx(list(board["fast_0"]))


def test_flag_anomalies_of_join_runs_matches_the_cli(joined, capsys):
    flags = flag_anomalies(joined)
    cli = _cli_json(capsys, "anomalies")["flags"]
    assert sorted((f["run"], f["flag"]) for f in cli) == sorted(zip(flags["run"], flags["flag"]))
    assert {"no_custom_kernel", "lower_precision", "near_identity"} <= set(flags["flag"])


def test_a_cpu_timed_record_is_no_speedup_on_the_leaderboard(capsys):
    record = RUNS_FIXTURES / "eval_record.json"  # a CPU record of an older evaluator, speedup 0.0002
    runs = load_runs(record)
    assert not runs.loc[0, "timing_meaningful"] and runs["speedup"].isna().all()
    board = leaderboard(join_runs(runs))
    assert board.loc[0, "correct"] == 1 and board["geomean_speedup"].isna().all()
    capsys.readouterr()
    assert main(["runs", "summary", "--source", str(record)]) == 0
    out = capsys.readouterr().out
    assert "speedup n/a on CPU (interpreter timing tests the machinery)" in out
    assert "0.000224" not in out
    assert board["mean_sol_fraction"].isna().all()  # a CPU time reaches no fraction of a GPU's speed of light
