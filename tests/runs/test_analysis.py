"""Leaderboard arithmetic, distributions, anomaly flags, solution scan, problem facts, plots, CLI.

Expected values are computed by hand from tests/fixtures/runs/published_schema_fixture/results.csv.
"""

import json
import math
import shutil
import warnings

import numpy as np
import pytest

from kernelbench_v3.catalog.problem import discover
from kernelbench_v3.runs.anomalies import flag_anomalies, flagged_runs, robust_z
from kernelbench_v3.runs.facts import facts_table
from kernelbench_v3.runs.leaderboard import card_table, leaderboard, speedup_distribution
from kernelbench_v3.runs.load import join_runs, load_runs
from kernelbench_v3.runs.solution_scan import scan_source
from kernelbench_v3.runs.speed_of_light import add_roofline
from tests.paths import PROBLEMS, PUBLISHED

FIXTURE_PROBLEMS = (
    "level1/2_Standard_matrix_multiplication_",
    "level1/23_Softmax",
    "level1/40_LayerNorm",
    "graphics/bloom",
    "tile_specialized/gemv_bf16",
    "cutile/stream_k_gemm",
)


@pytest.fixture(scope="module")
def problems_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("problems")
    for pid in FIXTURE_PROBLEMS:
        source = PROBLEMS / f"{pid}.py"
        if not source.is_file():
            pytest.skip(f"problem file {pid} not written yet")
        (root / pid).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, root / f"{pid}.py")
    return root


@pytest.fixture(scope="module")
def catalog(problems_root):
    return discover(problems_root)


@pytest.fixture(scope="module")
def facts(catalog):
    return facts_table(catalog)  # cached under $KBV3_CACHE_DIR for the session


@pytest.fixture(scope="module")
def joined(catalog, facts):
    runs = load_runs(PUBLISHED, problems=catalog, solutions=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return add_roofline(join_runs(runs, catalog, facts))


def _row(board, gpu, model):
    return board[(board["gpu"] == gpu) & (board["model"] == model)].iloc[0]


def test_leaderboard_matches_hand_computed_values(joined, catalog):
    board = leaderboard(joined, catalog)
    assert len(board) == 13
    a = _row(board, "RTX3090", "Model A")  # 2.0, 0.5, 8.0 correct; LayerNorm wrong
    assert (a.correct, a.total, a.correct_str, a.attempted) == (3, 4, "3/4", 4)
    assert a.geomean_speedup == pytest.approx((2.0 * 0.5 * 8.0) ** (1 / 3)) == pytest.approx(2.0)
    assert a.cost_usd == pytest.approx(0.1 + 0.2 + 0.3 + 0.4)
    assert a.cost_per_correct == pytest.approx(1.0 / 3)
    b = _row(board, "RTX3090", "Model_B v2")  # one failed run without a cost, one correct 4x
    assert (b.correct_str, b.geomean_speedup, b.cost_usd, b.cost_per_correct) == ("1/4", 4.0, 0.05, 0.05)
    delta = _row(board, "H100", "Delta")
    assert delta.correct_str == "2/4" and delta.geomean_speedup == pytest.approx(math.sqrt(1.2 * 3.0))
    assert delta.cost_per_correct == pytest.approx((0.04 + 0.08) / 2)
    eps = _row(board, "H100", "Epsilon")  # the unmatched problem still counts: kept, not dropped
    assert eps.correct_str == "2/4" and eps.geomean_speedup == pytest.approx(math.sqrt(1.05 * 2.0))
    gamma = _row(board, "B200", "Gamma")
    assert gamma.correct_str == "0/5" and math.isnan(gamma.geomean_speedup) and math.isnan(gamma.cost_per_correct)
    assert gamma.cost_usd == pytest.approx(0.27)
    assert list(board["gpu"].unique()) == ["RTX3090", "H100", "B200"]
    assert list(board[board["gpu"] == "H100"]["correct"]) == [2, 2, 2, 1, 1, 1]


def test_card_table_layout(joined, catalog):
    table = card_table(leaderboard(joined, catalog))
    assert list(table.columns) == ["RTX3090", "H100", "B200"]
    assert table.loc["Model A"].tolist() == ["3/4", "1/4", "1/5"]
    assert table.loc["Zeta"].tolist() == ["n/a", "1/4", "n/a"]  # n/a, as every table says (issue 41)
    assert table.index[0] == "Model A"  # 5 correct in all, the most


def test_leaderboard_without_catalog_counts_problems_seen(joined):
    board = leaderboard(joined.drop(columns=[]).copy())  # attrs carry no totals here
    assert _row(board, "H100", "Delta").total == 4  # softmax, gemv, 2_Standard, 99_Unknown


def test_speedup_distribution(joined):
    dist = speedup_distribution(joined)
    h100 = dist[(dist["gpu"] == "H100") & (dist["level_group"] == "level1")].iloc[0]
    speedups = [1.0, 1.1, 0.9, 1.2, 1.05, 40.0, 3.0, 2.0]  # incl. the unmatched level-1 run
    assert h100.runs == 8
    assert h100.geomean == pytest.approx(math.exp(np.mean(np.log(speedups))))
    assert h100["median"] == pytest.approx(np.median(speedups))
    assert h100.faster_share == pytest.approx(6 / 8)
    assert set(dist[dist["gpu"] == "B200"]["level_group"]) == {"cutile", "level1", "tile_specialized"}


def test_roofline_columns(joined):
    zeta = joined.loc[11]  # softmax on H100: 33.5 MB at the H100's bandwidth
    from kernelbench_v3.hardware.gpus import get_gpu

    expected = 33_554_432 / get_gpu("H100").bandwidth_bytes_per_s * 1e3
    assert zeta.sol_light_ms == pytest.approx(expected)
    assert zeta.headroom == pytest.approx(0.027 / expected)
    assert math.isnan(joined.loc[14, "sol_light_ms"])  # unmatched: no roofline


def test_flags_exactly(joined):
    flags = flag_anomalies(joined)
    got = {(int(r.run), str(r.flag)) for r in flags.itertuples()}
    assert got == {
        (5, "no_custom_kernel"),
        (5, "near_identity"),
        (11, "faster_than_light"),
        (11, "above_headroom"),
        (11, "no_custom_kernel"),
        (11, "outlier"),
        (13, "above_headroom"),
        (13, "lower_precision"),
        (13, "no_custom_kernel"),
    }
    reasons = {(int(r.run), str(r.flag)): r.reason for r in flags.itertuples()}
    assert "below the speed of light" in reasons[(11, "faster_than_light")]
    assert "never launches" in reasons[(11, "no_custom_kernel")]
    assert "bf16 is lower than the reference's fp32" in reasons[(13, "lower_precision")]
    assert "only torch library calls (matmul)" in reasons[(13, "no_custom_kernel")]
    assert "only in comments" in reasons[(5, "no_custom_kernel")]
    assert "robust-z" in reasons[(11, "outlier")]
    runs = flagged_runs(joined, flags)
    assert list(runs.index) == [11, 13, 5] and runs.loc[11, "n_flags"] == 4


def test_outlier_z_score_by_hand(joined):
    z = robust_z(joined)
    logs = np.log([1.0, 1.1, 0.9, 1.2, 1.05, 40.0])
    median = np.median(logs)
    mad = np.median(np.abs(logs - median))
    assert z.loc[11] == pytest.approx(0.6745 * (np.log(40.0) - median) / mad)
    assert math.isnan(z.loc[0])  # a group of one is never an outlier


def test_speedup_mismatch_and_factor(joined):
    bent = joined.copy()
    bent.loc[0, "speedup"] = 3.0  # ref 1.0 / sol 0.5 says 2.0
    flags = flag_anomalies(bent, headroom_factor=100.0)
    got = {(int(r.run), str(r.flag)) for r in flags.itertuples()}
    assert (0, "speedup_mismatch") in got
    assert not any(f == "above_headroom" for _, f in got)  # factor 100 lifts the headroom line


@pytest.mark.parametrize(
    "source, has_kernel, marker",
    [
        ("import triton\n@triton.jit\ndef k(x):\n    pass\ndef f(x):\n    k[(1,)](x)\n", True, "triton.jit"),
        ("import triton\n@triton.jit\ndef k(x):\n    pass\ndef f(x):\n    return x.sum()\n", False, None),
        (
            "from torch.utils.cpp_extension import load_inline\nm = load_inline('m', '', cuda_sources=s)\n",
            True,
            "load_inline",
        ),
        ('src = """__global__ void k(float* x) {}"""\n', True, "cuda source"),
        ("import cuda.tile as ct\n@ct.kernel\ndef k(a):\n    pass\n", True, "cutile"),
        ("import cutlass.cute as cute\n", True, "cutlass"),
        (
            "# uses @triton.jit\nimport torch\ny = torch.nn.functional.scaled_dot_product_attention(q, k, v)\n",
            False,
            None,
        ),
        ("import torch\ndef f(a, b):\n    return torch.matmul(a, b)\n", False, None),
    ],
)
def test_scan_source(source, has_kernel, marker):
    scan = scan_source(source)
    assert scan.has_custom_kernel is has_kernel, scan.reason
    if marker:
        assert marker in scan.markers
    if "matmul" in source:
        assert scan.torch_calls == ("matmul",)


def test_problem_facts(facts):
    by_id = facts.set_index("problem_id")
    assert by_id.loc["level1/40_LayerNorm", "near_identity"]  # the published reward hack
    assert by_id.loc["level1/40_LayerNorm", "identity_sizes"] == "default"
    assert not by_id.loc["level1/23_Softmax", "near_identity"]
    assert by_id.loc["tile_specialized/gemv_bf16", "reference_precision"] == "bf16"
    assert by_id.loc["cutile/stream_k_gemm", "reference_precision"] == "fp16"
    assert by_id.loc["level1/2_Standard_matrix_multiplication_", "near_identity"] == False  # noqa: E712


@pytest.mark.slow
def test_plots_produce_figures(joined, tmp_path):
    from kernelbench_v3.runs import plots

    flags = flag_anomalies(joined)
    for name, fig in [
        ("headroom", plots.speedup_vs_headroom(joined, flags)),
        ("levels", plots.speedup_by_level(joined)),
        ("flags", plots.flags_by_model(flags)),
    ]:
        assert fig.axes
        path = tmp_path / f"{name}.png"
        fig.savefig(path)
        assert path.stat().st_size > 5000
    panel = plots.speedup_vs_headroom(joined, flags).axes[1]  # H100
    assert panel.get_title() == "H100: 8 correct runs with a roofline, 2 flagged"


def test_cli_summary_and_anomalies(problems_root, capsys):
    from kernelbench_v3.cli.main import main

    assert main(["runs", "summary", "--source", str(PUBLISHED), "--problems", str(problems_root), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {(r["gpu"], r["model"]): r for r in data["leaderboard"]}
    assert rows[("RTX3090", "Model A")]["correct_str"] == "3/4"
    assert len(data["unmatched"]) == 3

    assert main(["runs", "summary", "--source", str(PUBLISHED), "--problems", str(problems_root)]) == 0
    text = capsys.readouterr().out
    assert "== RTX3090 ==" in text and "3/4" in text and "match no catalog problem" in text

    assert main(["runs", "anomalies", "--source", str(PUBLISHED), "--problems", str(problems_root)]) == 0
    text = capsys.readouterr().out
    assert "3 flagged run(s) of 21" in text and "faster_than_light" in text and "near_identity" in text

    assert main(["runs", "anomalies", "--source", str(PUBLISHED), "--problems", str(problems_root), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["flags"]) == 9 and {r["run"] for r in data["flagged_runs"]} == {5, 11, 13}

    assert main(["runs", "summary", "--source", str(PUBLISHED / "nope.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err
