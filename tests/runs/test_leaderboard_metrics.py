"""fast_p and the speed-of-light fractions of the leaderboard, against values computed by hand
on a tiny frame, and their presence in `kbv3 runs summary --json`."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from kernelbench_v3.cli.main import main
from kernelbench_v3.runs.leaderboard import FAST_P, fast_p, fast_p_column, leaderboard
from tests.paths import PUBLISHED


@pytest.fixture
def tiny() -> pd.DataFrame:
    # H100 split of 4 problems. Model A: p1 2.5x; p2 twice (1.2x, 1.6x: the best counts once);
    # p3 incorrect (its 5x does not count); p4 0.5x. Model B: p1 at exactly 1.5x, no roofline.
    rows = [
        ("A", "p1", True, 2.5, 1.0, 0.5),
        ("A", "p2", True, 1.2, 2.0, 0.2),
        ("A", "p2", True, 1.6, 1.0, 0.2),
        ("A", "p3", False, 5.0, 0.1, 0.3),
        ("A", "p4", True, 0.5, 4.0, 0.4),
        ("B", "p1", True, 1.5, 1.0, np.nan),
    ]
    frame = pd.DataFrame(rows, columns=["model", "problem_id", "correct", "speedup", "sol_ms", "sol_light_ms"])
    frame["gpu"] = "H100"
    frame["problem_file"] = frame["problem_id"] + ".py"
    frame["estimated_cost_usd"] = 0.01
    frame.attrs["split_totals"] = {"H100": 4}
    return frame


def test_fast_p_and_sol_fractions_by_hand(tiny):
    board = leaderboard(tiny).set_index("model")
    a, b = board.loc["A"], board.loc["B"]
    assert (a["correct"], a["total"]) == (3, 4)
    assert [a["fast_0"], a["fast_1"], a["fast_1.5"], a["fast_2"]] == [0.75, 0.5, 0.5, 0.25]
    assert [b["fast_0"], b["fast_1"], b["fast_1.5"], b["fast_2"]] == [0.25, 0.25, 0.0, 0.0]  # > p, strictly
    # fractions of correct runs: 0.5/1, 0.2/2, 0.2/1, 0.4/4 = 0.5, 0.1, 0.2, 0.1
    assert a["mean_sol_fraction"] == pytest.approx(0.225)
    assert a["median_sol_fraction"] == pytest.approx(0.15)
    assert a["geomean_speedup"] == pytest.approx((2.5 * 1.2 * 1.6 * 0.5) ** 0.25)
    assert math.isnan(b["mean_sol_fraction"]) and math.isnan(b["median_sol_fraction"])


def test_fast_p_curve_table_matches_the_leaderboard(tiny):
    curve = fast_p(tiny, thresholds=(0, 1, 1.5, 2, 3))
    a = curve[curve["model"] == "A"].set_index("p")["fast_p"]
    assert a.to_dict() == {0.0: 0.75, 1.0: 0.5, 1.5: 0.5, 2.0: 0.25, 3.0: 0.0}
    board = leaderboard(tiny).set_index("model")
    for p in FAST_P:
        assert curve.set_index(["model", "p"]).loc[("B", p), "fast_p"] == board.loc["B", fast_p_column(p)]


def test_runs_summary_json_carries_the_metrics(capsys):
    assert main(["runs", "summary", "--source", str(PUBLISHED), "--json"]) == 0
    board = json.loads(capsys.readouterr().out)["leaderboard"]
    for row in board:
        assert {"fast_0", "fast_1", "fast_1.5", "fast_2", "mean_sol_fraction", "median_sol_fraction"} <= set(row)
        assert row["fast_0"] == pytest.approx(row["correct"] / row["total"])
        assert row["fast_0"] >= row["fast_1"] >= row["fast_1.5"] >= row["fast_2"]
    zeta = next(r for r in board if r["model"] == "Zeta")  # 40x softmax: beyond the speed of light
    assert zeta["median_sol_fraction"] > 1
