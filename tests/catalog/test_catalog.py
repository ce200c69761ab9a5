"""The catalog: 60 problems, the split rules, and one clear error per malformed file."""

import json
import textwrap

import pytest

from kernelbench_v3.catalog.problem import (
    CatalogError,
    ProblemFileError,
    discover,
    get_problem,
    read_problem,
    splits_of,
)
from tests.paths import EXPECTED, REPO

SPEC = REPO.parent / "shared" / "problem-spec.md"

# Ids as the spec names them (problem-spec.md section headings), per folder.
EXPECTED_COUNTS = {
    "level1": 15,
    "level2": 15,
    "level3": 3,
    "level4": 9,
    "graphics": 2,
    "tile_specialized": 13,
    "cutile": 3,
}


def spec_file_names() -> set[str]:
    """Every `folder/file.py` heading of the spec, when the spec is beside the checkout."""
    import re

    text = SPEC.read_text(encoding="utf-8")
    return set(re.findall(r"^#{2,3} `([a-z_0-9]+/[A-Za-z0-9_]+\.py)`", text, flags=re.M))


def test_catalog_lists_60_problems_with_published_split_sizes(problems_dir):
    problems = discover(problems_dir)
    assert len(problems) == 60
    counts = {}
    for p in problems:
        counts[p.category] = counts.get(p.category, 0) + 1
    assert counts == EXPECTED_COUNTS
    assert len(discover(problems_dir, split="rtx3090")) == 43
    assert len(discover(problems_dir, split="h100")) == 54
    assert len(discover(problems_dir, split="b200")) == 58


@pytest.mark.skipif(not SPEC.is_file(), reason="shared/problem-spec.md is not beside this checkout")
def test_ids_and_file_names_match_the_spec(problems_dir):
    ours = {f"{p.category}/{p.file_name}" for p in discover(problems_dir)}
    assert ours == spec_file_names()


def test_split_membership_is_by_folder_and_exclude_list():
    assert splits_of("level4", "9_FP4_BlockScaled_Matmul.py") == ("b200",)
    assert splits_of("level1", "9_Tall_skinny_matrix_multiplication_.py") == ("rtx3090", "h100", "b200")
    assert splits_of("graphics", "bloom.py") == ("rtx3090",)
    assert splits_of("tile_specialized", "gemm_fp4.py") == ("h100", "b200")
    assert splits_of("cutile", "persistent_gemm.py") == ("b200",)


def test_problem_metadata_is_read_without_running(problems_dir):
    p = get_problem("level1/40_LayerNorm", problems_dir)
    assert (p.file_name, p.category, p.level, p.op_type) == ("40_LayerNorm.py", "level1", 1, "layernorm")
    assert p.supported_precisions == ("fp16", "bf16", "fp32")
    assert p.hardware_required == ("RTX3090", "H100", "B200")
    assert p.gpus == ("rtx3090", "h100", "b200")
    assert len(p.sha256) == 64
    tile = get_problem("tile_specialized/gemm_bf16", problems_dir)
    assert tile.level == 1 and tile.constant("SPECIALIZED_LEVEL") == 1
    assert "A100" in tile.hardware_required  # published quirk kept as metadata


def test_every_problem_has_reduced_sizes_naming_real_size_variables(problems_dir):
    for p in discover(problems_dir):
        assert p.reduced, f"{p.problem_id} has no REDUCED_SIZES"
        assert set(p.reduced) <= set(p.sizes), p.problem_id


GOOD = textwrap.dedent("""
    import torch
    OP_TYPE = "gemm"
    SUPPORTED_PRECISIONS = ["fp32"]
    HARDWARE_REQUIRED = ["H100"]
    n = 8
    class Model(torch.nn.Module):
        def forward(self, a):
            return a
    def get_inputs():
        return [torch.randn(n)]
    def get_init_inputs():
        return []
""")

DEFECTS = {
    "syntax": (GOOD.replace("def get_inputs():", "def get_inputs(:"), "syntax error at line"),
    "no_model": (GOOD.replace("class Model", "class Other"), "missing required definition(s): Model"),
    "no_get_inputs": (GOOD.replace("def get_inputs", "def make_inputs"), "get_inputs"),
    "no_get_init_inputs": (GOOD.replace("def get_init_inputs", "def init"), "get_init_inputs"),
    "no_op_type": (GOOD.replace('OP_TYPE = "gemm"\n', ""), "missing required constant(s): OP_TYPE"),
    "not_literal": (GOOD.replace('["fp32"]', "[str(32)]"), "SUPPORTED_PRECISIONS must be a plain literal"),
    "unknown_gpu": (GOOD.replace('["H100"]', '["H100", "GTX480"]'), "unknown GPU name(s) ['GTX480']"),
    "bad_reduced": (GOOD + "REDUCED_SIZES = {'m': 2}\n", "REDUCED_SIZES names ['m']"),
    "precision_type": (GOOD.replace('["fp32"]', '"fp32"'), "SUPPORTED_PRECISIONS must be a list of strings"),
}


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_malformed_file_gets_one_clear_error_naming_file_and_defect(tmp_path, defect):
    source, message = DEFECTS[defect]
    path = tmp_path / "level1" / f"1_{defect}.py"
    path.parent.mkdir()
    path.write_text(source)
    with pytest.raises(ProblemFileError) as info:
        read_problem(path, tmp_path)
    assert str(path) in str(info.value)
    assert message in str(info.value)


def test_a_file_rewritten_in_place_is_read_again(tmp_path):
    """read_problem remembers a file by its text: a new text is parsed anew, a malformed one
    raises every time, and the old text gives back what it gave."""
    path = tmp_path / "level1" / "1_gemm.py"
    path.parent.mkdir()
    path.write_text(GOOD)
    first = read_problem(path, tmp_path)
    path.write_text(GOOD.replace('OP_TYPE = "gemm"', 'OP_TYPE = "conv"'))
    assert (first.op_type, read_problem(path, tmp_path).op_type) == ("gemm", "conv")
    path.write_text(DEFECTS["unknown_gpu"][0])
    for _ in range(2):
        with pytest.raises(ProblemFileError, match="GTX480"):
            read_problem(path, tmp_path)
    path.write_text(GOOD)
    assert read_problem(path, tmp_path) == first


def test_catalog_reports_every_malformed_file_at_once(tmp_path):
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "1_ok.py").write_text(GOOD)
    (tmp_path / "level1" / "2_bad.py").write_text(DEFECTS["syntax"][0])
    (tmp_path / "level1" / "3_bad.py").write_text(DEFECTS["unknown_gpu"][0])
    with pytest.raises(CatalogError) as info:
        discover(tmp_path)
    assert len(info.value.errors) == 2
    assert "2_bad.py" in str(info.value) and "3_bad.py" in str(info.value)


def test_unknown_split_and_unknown_problem_are_clear_errors(problems_dir):
    with pytest.raises(ValueError, match="unknown split 'a100'"):
        discover(problems_dir, split="a100")
    with pytest.raises(KeyError, match="no problem 'level1/0_Nothing'"):
        get_problem("level1/0_Nothing", problems_dir)


def test_cli_ls_and_validate(problems_dir, capsys):
    from kernelbench_v3.cli.main import main

    assert main(["validate", "--problems", str(problems_dir)]) == 0
    assert "60 problems; rtx3090: 43, h100: 54, b200: 58" in capsys.readouterr().out
    assert main(["ls", "--split", "h100", "--json", "--problems", str(problems_dir)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 54 and all("h100" in r["gpus"] for r in rows)


def test_ids_match_the_expected_output_tables(problems_dir):
    """tests/expected/*.json were written from the spec, one key per published file stem."""
    expected = set()
    for table in EXPECTED.glob("*.json"):
        expected |= {f"{table.stem}/{stem}" for stem in json.loads(table.read_text())}
    assert {p.problem_id for p in discover(problems_dir)} == expected
