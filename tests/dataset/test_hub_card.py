"""The dataset card: task category, citation, links, how to evaluate, the level recipe and why
`init_inputs` is a string; and the level recipe it documents works on a built folder."""

import json
import shutil

import pyarrow as pa
import pytest
import yaml

from kernelbench_v3.dataset import hub
from kernelbench_v3.dataset.card import RUNS_REPO_ID, render_card
from tests.paths import PROBLEMS


@pytest.fixture(scope="module")
def card() -> str:
    tables = {s: pa.Table.from_pylist([], schema=hub.schema(True)) for s in ("rtx3090", "h100", "b200")}
    return render_card(tables)


def test_front_matter_declares_the_task_category(card):
    meta = yaml.safe_load(card.split("---\n", 2)[1])
    assert meta["task_categories"] == ["text-generation"]
    assert [c["config_name"] for c in meta["configs"]] == ["default"]


def test_body_cites_links_and_says_how_to_evaluate(card):
    body = card.split("---\n", 2)[2]
    assert "@misc{ouyang2025kernelbench," in body and "Ouyang, Anne" in body and "2502.10517" in body
    assert "@misc{kernelbench_v3_2026," in body
    assert f"https://huggingface.co/datasets/{RUNS_REPO_ID}" in body
    assert "https://github.com/ScalingIntelligence/KernelBench" in body
    assert "## How to evaluate" in body
    for command in ("kbv3 prompts", "kbv3 extract", "kbv3 eval --problem", "kbv3 eval-batch", "kbv3 runs summary"):
        assert command in body
    assert 'filter(lambda row: row["category"] == "level1")' in body and "no per-level config" in body
    assert "`init_inputs` is a JSON string rather than a typed list" in body
    assert "{runs_repo}" not in body and "{paper}" not in body  # every placeholder filled


def test_the_documented_level_filter_works_on_a_built_folder(tmp_path):
    problems = tmp_path / "problems"
    for pid in ("level1/23_Softmax", "level2/40_Matmul_Scaling_ResidualAdd"):
        (problems / pid).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PROBLEMS / f"{pid}.py", problems / f"{pid}.py")
    hub.build(tmp_path / "hub", problems, with_prompts=False)
    rows = hub.load_problems("h100", tmp_path / "hub", cache_dir=str(tmp_path / "hf"))
    level1 = rows.filter(lambda row: row["category"] == "level1")
    assert level1["problem_id"] == ["level1/23_Softmax"]
    init = json.loads(rows[1]["init_inputs"])
    assert isinstance(init, list)
