"""The problem facts shipped with the package: they cover every bundled problem at its current
content, equal what computing them gives, and spare the analysis any computation; a problem
that is not shipped is computed with a progress bar."""

import json
import shutil

import pytest

from kernelbench_v3.catalog.problem import discover, get_problem
from kernelbench_v3.runs import facts as problem_facts
from kernelbench_v3.runs.facts import SHIPPED_FACTS, compute_facts, fact_key, facts_table, shipped_facts
from tests.paths import PROBLEMS, PUBLISHED


def test_shipped_facts_cover_every_bundled_problem_at_its_current_content():
    shipped = shipped_facts()
    missing = [p.problem_id for p in discover() if fact_key(p) not in shipped]
    assert not missing, (
        f"{SHIPPED_FACTS} is stale for {missing}; regenerate it with `python -m kernelbench_v3.runs.facts`"
    )


@pytest.mark.parametrize(
    "problem_id", ["level1/23_Softmax", pytest.param("level1/40_LayerNorm", marks=pytest.mark.slow)]
)
def test_shipped_facts_equal_computed_ones(problem_id):
    problem = get_problem(problem_id)
    computed = compute_facts(problem)
    shipped = shipped_facts()[fact_key(problem)]
    assert shipped.keys() == computed.keys()
    for key, value in computed.items():
        if isinstance(value, float):
            assert shipped[key] == pytest.approx(value, rel=1e-3), key
        else:
            assert shipped[key] == value, key


def test_the_analysis_computes_nothing_for_bundled_problems(monkeypatch, tmp_path):
    def refuse(*args, **kwargs):
        raise AssertionError("computed a fact that is shipped")

    monkeypatch.setattr(problem_facts, "compute_facts", refuse)
    table = facts_table(discover(), cache=tmp_path / "facts.json")
    assert len(table) == 60 and not (tmp_path / "facts.json").exists()
    assert table.set_index("problem_id").loc["level1/40_LayerNorm", "near_identity"]


def test_a_problem_not_shipped_is_computed_with_progress_and_cached(tmp_path, capsys):
    root = tmp_path / "problems" / "level1"
    root.mkdir(parents=True)
    edited = root / "23_Softmax.py"
    edited.write_text((PROBLEMS / "level1" / "23_Softmax.py").read_text() + "\n# edited\n")
    shutil.copy(PROBLEMS / "level1" / "26_GELU_.py", root)
    problems = discover(tmp_path / "problems")
    cache = tmp_path / "facts.json"
    table = facts_table(problems, cache=cache, progress=True)
    err = capsys.readouterr().err
    assert "problem facts (1 not shipped or cached" in err  # the GELU file is shipped as it is
    assert table.set_index("problem_id").loc["level1/23_Softmax", "reference_precision"] == "fp32"
    assert list(json.loads(cache.read_text())["facts"]) == [fact_key(problems[0])]


def test_anomaly_reasons_name_the_peak_they_use(capsys):
    from kernelbench_v3.cli.main import main

    source = PUBLISHED
    assert main(["runs", "anomalies", "--source", str(source)]) == 0
    text = capsys.readouterr().out
    assert "below the speed of light 0.01002 ms on H100 at the H100 fp32 peak (67 TFLOP/s dense, 3350 GB/s)" in text
    assert "at the H100 fp32 peak (67 TFLOP/s dense, 3350 GB/s), the reference's precision" in text
