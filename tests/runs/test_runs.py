"""Loading, validating and normalising the runs dataset (tests/fixtures/runs, hand-made)."""

import json
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from kernelbench_v3.catalog.problem import discover
from kernelbench_v3.runs.load import (
    RunsSchemaError,
    RunsSourceError,
    UnmatchedRunsWarning,
    canonical_gpu,
    join_runs,
    load_runs,
    parse_level,
    unmatched,
)
from kernelbench_v3.runs.schema import RUNS_SCHEMA
from kernelbench_v3.runs.solution_files import parse_solution_name, solution_file_name
from kernelbench_v3.vocab import PUBLISHED_RUNS_COLUMNS
from tests.paths import PROBLEMS, PUBLISHED, RUNS_FIXTURES

FIXTURE_PROBLEMS = (
    "level1/2_Standard_matrix_multiplication_",
    "level1/23_Softmax",
    "level1/40_LayerNorm",
    "graphics/bloom",
    "tile_specialized/gemv_bf16",
    "cutile/stream_k_gemm",
)


def make_problems(root: Path) -> Path:
    """A tiny problems folder: copies of the six problems the fixture CSV refers to."""
    for pid in FIXTURE_PROBLEMS:
        source = PROBLEMS / f"{pid}.py"
        if not source.is_file():
            pytest.skip(f"problem file {pid} not written yet")
        (root / pid).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, root / f"{pid}.py")
    return root


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    return discover(make_problems(tmp_path_factory.mktemp("problems")))


@pytest.fixture(scope="module")
def runs(catalog):
    return load_runs(PUBLISHED, problems=catalog, solutions=True)


def test_loads_every_row_typed_and_normalised(runs):
    assert len(runs) == 21
    assert set(PUBLISHED_RUNS_COLUMNS) <= set(runs.columns)
    assert tuple(RUNS_SCHEMA) == PUBLISHED_RUNS_COLUMNS  # one type per published column, in order
    assert set(runs["gpu"]) == {"RTX3090", "H100", "B200"}
    assert dict(zip(runs["gpu"], runs["split"])) == {"RTX3090": "rtx3090", "H100": "h100", "B200": "b200"}
    assert runs["compiled"].dtype == "boolean" and runs["speedup"].dtype == "float64"
    assert runs.loc[0, "problem_id"] == "level1/2_Standard_matrix_multiplication_"
    assert runs.loc[3, "problem_id"] == "graphics/bloom"  # level 1 in the data, category graphics
    assert runs.loc[16, "category_hint"] == "level1" and runs.loc[16, "level"] == 1
    assert runs.loc[19, "problem_id"] == "tile_specialized/gemv_bf16"  # level written as a category
    assert pd.isna(runs.loc[19, "level"])
    assert pd.isna(runs.loc[4, "speedup"]) and pd.isna(runs.loc[4, "estimated_cost_usd"])
    assert runs.loc[4, "turns"] == 0


def test_unmatched_rows_are_reported_with_reasons(runs):
    bad = runs[runs["match"] != "matched"]
    assert list(bad.index) == [14, 18, 20]
    assert "no problem file named '99_Unknown_problem.py'" in bad.loc[14, "match"]
    assert bad.loc[18, "match"] == "graphics/bloom is not in the b200 split"
    assert "category 'level2'" in bad.loc[20, "match"]


def test_join_keeps_every_row_and_warns_about_unmatched(runs, catalog):
    with pytest.warns(UnmatchedRunsWarning, match="3 run"):
        joined = join_runs(runs, catalog)
    assert len(joined) == len(runs) and list(joined.index) == list(runs.index)
    assert joined.loc[0, "problem_category"] == "level1" and joined.loc[0, "flops"] == 17_179_869_184
    assert joined.loc[12, "supported_precisions"] == "bf16"
    assert joined["matched"].sum() == 18
    assert pd.isna(joined.loc[14, "problem_category"])
    assert list(unmatched(joined).index) == [14, 18, 20]


def test_join_without_unmatched_is_silent(runs, catalog):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        join_runs(runs[runs["match"] == "matched"], catalog)


def test_solutions_attached_by_published_name_and_orphans_parsed(runs):
    with_source = runs[runs["solution_source"].notna()]
    assert len(with_source) == 6
    assert "matmul_kernel[grid]" in runs.loc[0, "solution_source"]
    assert runs.loc[1, "solution_source"] is None  # no file shipped for it
    assert runs.attrs["orphan_solutions"] == [("Old_Model_H100_gemv_bf16.py.txt", "Old_Model", "H100", "gemv_bf16.py")]


def test_parse_solution_name_with_underscores():
    assert parse_solution_name("Model_B v2_RTX3090_40_LayerNorm.py.txt") == ("Model_B v2", "RTX3090", "40_LayerNorm.py")
    assert solution_file_name("Model_B v2", "RTX3090", "40_LayerNorm.py") == "Model_B v2_RTX3090_40_LayerNorm.py.txt"
    # A model name that itself contains a GPU separator: the known problem decides.
    name = "X_H100_tuned_B200_gemv_bf16.py.txt"
    assert parse_solution_name(name, ["gemv_bf16.py"]) == ("X_H100_tuned", "B200", "gemv_bf16.py")
    assert parse_solution_name(name, ["tuned_B200_gemv_bf16.py"]) == ("X", "H100", "tuned_B200_gemv_bf16.py")
    with pytest.raises(ValueError, match="no _<GPU>_ separator"):
        parse_solution_name("model_A100_x.py.txt")
    with pytest.raises(ValueError, match="does not end with .py.txt"):
        parse_solution_name("model_H100_x.py")


@pytest.mark.parametrize(
    "value, expected",
    [("RTX3090", "RTX3090"), ("rtx 3090", "RTX3090"), ("h100", "H100"), ("B200", "B200"), ("A100", None)],
)
def test_canonical_gpu(value, expected):
    assert canonical_gpu(value) == expected


@pytest.mark.parametrize(
    "value, expected",
    [
        (1, (1, None)),
        ("3", (3, None)),
        (2.0, (2, None)),
        ("level4", (4, "level4")),
        ("Level_2", (2, "level2")),
        ("graphics", (None, "graphics")),
        ("cutile", (None, "cutile")),
        ("", (None, None)),
        ("expert", None),
        (0, None),
        (1.5, None),
        (True, None),
    ],
)
def test_parse_level(value, expected):
    assert parse_level(value) == expected


def test_each_bad_row_is_named_with_column_and_line(catalog):
    with pytest.raises(RunsSchemaError) as info:
        load_runs(RUNS_FIXTURES / "bad_rows.csv", problems=catalog)
    found = {(p.row, p.column): p.message for p in info.value.problems}
    expected = {
        (0, "gpu"): "unknown GPU 'A100'",
        (1, "compiled"): "'maybe' is not a boolean",
        (2, "speedup"): "'fast' is not a number",
        (3, "turns"): "'2.5' is not a whole number",
        (4, "level"): "level 'expert' is not a level number",
        (5, "model"): "is empty",
        (6, "correct"): "is True but compiled is False",
        (7, "sol_ms"): "-1.0 must be > 0",
        (8, "total_tokens"): "'-5' is negative",
    }
    assert set(found) == set(expected)
    for key, text in expected.items():
        assert text in found[key], (key, found[key])
    message = str(info.value)
    assert "bad_rows.csv row 0 (line 2), column 'gpu': unknown GPU 'A100'" in message
    assert "9 schema error(s)" in message


def _write(frame: pd.DataFrame, path: Path) -> Path:
    frame.to_csv(path, index=False)
    return path


def test_missing_and_extra_columns(tmp_path, catalog):
    raw = pd.read_csv(PUBLISHED / "results.csv", dtype=str, keep_default_na=False)
    with pytest.raises(RunsSchemaError, match="column 'speedup': missing column"):
        load_runs(_write(raw.drop(columns=["speedup"]), tmp_path / "a.csv"), problems=catalog)
    with pytest.raises(RunsSchemaError, match="column 'notes': unexpected column"):
        load_runs(_write(raw.assign(notes="x"), tmp_path / "b.csv"), problems=catalog)


def test_source_errors(tmp_path, catalog):
    with pytest.raises(RunsSourceError, match="does not exist"):
        load_runs(tmp_path / "nope.csv", problems=catalog)
    with pytest.raises(RunsSourceError, match="holds no results.csv"):
        load_runs(tmp_path, problems=catalog)
    (tmp_path / "x.txt").write_text("a")
    with pytest.raises(RunsSourceError, match="unsupported runs file type"):
        load_runs(tmp_path / "x.txt", problems=catalog)
    with pytest.raises(RunsSourceError, match="HF_HUB_OFFLINE is set; load a local source") as info:  # offline
        load_runs(None, problems=catalog)
    # A library (and a notebook) speaks of paths, not of a command line's flags (issue 29, point 14).
    assert "--source" not in str(info.value) and info.value.local_source
    assert "HF_HUB_OFFLINE is set; pass --source PATH" in info.value.worded_for("--source")


def test_dataframe_source(catalog):
    raw = pd.read_csv(PUBLISHED / "results.csv")  # pandas' own types: bools, floats, NaN
    runs = load_runs(raw, problems=catalog)
    assert len(runs) == 21 and runs["correct"].sum() == 16


def _records():
    from kernelbench_v3.evaluate.record import Record

    return [
        Record(
            model="ours",
            gpu="H100",
            level=1,
            problem="23_Softmax.py",
            problem_id="level1/23_Softmax",
            compiled=True,
            correct=False,
            status="incorrect",
            checks={"allclose": "fail"},
        ),
        Record(
            model="ours",
            gpu="H100",
            level=1,
            problem="23_Softmax.py",
            problem_id="level1/23_Softmax",
            compiled=True,
            correct=True,
            speedup=1.5,
            ref_ms=0.03,
            sol_ms=0.02,
            baseline_type="eager",
            precision_used="fp32",
            status="correct",
            checks={"allclose": "pass"},
        ),
        Record(
            model="ours",
            gpu="B200",
            level=None,
            problem="stream_k_gemm.py",
            problem_id="cutile/stream_k_gemm",
            compiled=False,
            correct=False,
            status="failed",
            error="boom",
        ),
    ]


def test_evaluator_records_jsonl_and_parquet(tmp_path, catalog):
    from kernelbench_v3.batch.run import write_parquet

    records = _records()
    journal = tmp_path / "records.jsonl"
    journal.write_text(
        json.dumps({"kbv3_batch_journal": 1, "settings": {}}) + "\n" + "\n".join(r.to_json() for r in records) + "\n"
    )
    write_parquet([r.to_dict() for r in records], tmp_path / "results.parquet")
    for source in (journal, tmp_path / "results.parquet"):
        runs = load_runs(source, problems=catalog)
        assert runs.attrs["kind"] == "records"
        assert len(runs) == 2  # the retry of the softmax record replaced the first one
        assert list(runs["problem_id"]) == ["level1/23_Softmax", "cutile/stream_k_gemm"]
        assert list(runs["match"]) == ["matched", "matched"]
        assert runs.loc[0, "speedup"] == 1.5 and bool(runs.loc[0, "correct"])
        assert runs["turns"].isna().all() and runs["solution_link"].isna().all()
        assert "status" in runs.columns  # record columns are kept


def test_records_missing_a_runs_column(tmp_path, catalog):
    rows = [r.to_dict() for r in _records()]
    for row in rows:
        del row["correct"]
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.raises(RunsSchemaError, match="column 'correct': missing column"):
        load_runs(path, problems=catalog)
