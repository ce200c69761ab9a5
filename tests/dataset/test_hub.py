"""Tests of the Hub dataset: build, load through the card, rows back to running models.

The slow part works on the real problems/ folder (built once per session with the real `kbv3`
command); the unit tests use a tiny problems folder written to tmp_path.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch

from kernelbench_v3.catalog import materialize as mat
from kernelbench_v3.catalog.problem import CatalogError, discover
from kernelbench_v3.catalog.specs import problem_specs, value_spec
from kernelbench_v3.dataset import hub
from tests.paths import EXPECTED, PROBLEMS
from tests.sampling import fast_sample

KBV3 = [sys.executable, "-m", "kernelbench_v3"]
EXPECTED_COUNTS = {"rtx3090": 43, "h100": 54, "b200": 58}
COLUMNS = [
    "problem_id",
    "name",
    "file_name",
    "category",
    "level",
    "op_type",
    "supported_precisions",
    "hardware_required",
    "gpus",
    "code",
    "sha256",
    "init_inputs",
    "input_specs",
    "output_spec",
    "flops",
    "bytes",
    "null_reason",
]

# Runs in a fresh interpreter: HF offline variables are set before `datasets` is imported.
# Loads every folder given; a folder whose split cannot be loaded reports the error instead.
LOAD_SCRIPT = textwrap.dedent("""
    import json, sys
    import datasets
    import kernelbench_v3
    from datasets import Features
    from huggingface_hub import DatasetCard

    out = {"offline": datasets.config.HF_HUB_OFFLINE}
    for folder in sys.argv[1:]:
        card = DatasetCard.load(folder + "/README.md").data.to_dict()
        features = card.get("dataset_info", {}).get("features")
        card_features = Features._from_yaml_list(features) if features else None
        out[folder] = {}
        for split in ("rtx3090", "h100", "b200"):
            try:
                ds = datasets.load_dataset(folder, split=split)
            except Exception as exc:
                out[folder][split] = {"error": f"{type(exc).__name__}: {exc}"}
                continue
            out[folder][split] = {
                "num_rows": ds.num_rows,
                "columns": ds.column_names,
                "features_match_card": ds.features == card_features,
                "ids": list(ds["problem_id"]),
                "gpus": list(ds["gpus"]),
                "api_ids": list(kernelbench_v3.load_problems(split, folder)["problem_id"]),
            }
    print("RESULT" + json.dumps(out))
""")


def offline_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_HOME=str(tmp / "hf"),
        HF_DATASETS_CACHE=str(tmp / "hf" / "datasets"),
        KBV3_MODULE_DIR=str(tmp / "modules"),
    )
    return env


def load_in_fresh_process(folders: list[Path], tmp: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT, *map(str, folders)],
        env=offline_env(tmp),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    return json.loads(line.removeprefix("RESULT"))


def read_rows(folder: Path, split: str) -> list[dict]:
    return pq.read_table(folder / hub.split_file(split)).to_pylist()


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return torch.equal(a.contiguous().view(-1).view(torch.uint8), b.contiguous().view(-1).view(torch.uint8))


# --- a tiny problems folder ---------------------------------------------------------------

TINY = {
    "level1/1_Tiny_matmul.py": """
        import torch
        import torch.nn as nn

        OP_TYPE = "gemm"
        SUPPORTED_PRECISIONS = ["fp32"]
        HARDWARE_REQUIRED = ["RTX3090", "H100", "B200"]


        class Model(nn.Module):
            def forward(self, a, b):
                return a @ b


        N = 8
        REDUCED_SIZES = {"N": 4}


        def get_inputs():
            return [torch.randn(N, N), torch.randn(N, N)]


        def get_init_inputs():
            return []
    """,
    "level1/2_Tiny_item.py": """
        import torch
        import torch.nn as nn

        OP_TYPE = "elementwise"
        SUPPORTED_PRECISIONS = ["fp32"]
        HARDWARE_REQUIRED = ["H100"]


        class Model(nn.Module):
            def __init__(self, scale, shape):
                super().__init__()
                self.scale = scale
                self.shape = shape

            def forward(self, x, k):
                return x * x.abs().max().item() * self.scale + k


        rows = 6


        def get_inputs():
            return [torch.randn(rows, 3), 2]


        def get_init_inputs():
            return [0.5, (rows, 3)]
    """,
    "tile_specialized/tiny_gemv.py": """
        import torch
        import torch.nn as nn

        OP_TYPE = "gemv"
        SUPPORTED_PRECISIONS = ["fp16"]
        HARDWARE_REQUIRED = ["H100", "B200"]
        SPECIALIZED_LEVEL = 2


        class Model(nn.Module):
            def __init__(self, k, n):
                super().__init__()
                self.proj = nn.Linear(k, n, dtype=torch.float16)

            def forward(self, x):
                return self.proj(x)


        k = 16
        n = 12


        def get_inputs():
            return [torch.randn(2, k, dtype=torch.float16)]


        def get_init_inputs():
            return [k, n]
    """,
    "graphics/tiny_blur.py": """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        OP_TYPE = "fused"
        SUPPORTED_PRECISIONS = ["fp32"]
        HARDWARE_REQUIRED = ["RTX3090"]


        class Model(nn.Module):
            def forward(self, img):
                return F.avg_pool2d(img, 3, stride=1, padding=1)


        height, width = 10, 12


        def get_inputs():
            return [torch.rand(1, 3, height, width)]


        def get_init_inputs():
            return []
    """,
    "level4/9_FP4_BlockScaled_Matmul.py": """
        import torch
        import torch.nn as nn

        OP_TYPE = "gemm"
        SUPPORTED_PRECISIONS = ["fp4"]
        HARDWARE_REQUIRED = ["B200"]


        class Model(nn.Module):
            def forward(self, x):
                return x.sum(dim=-1)


        def get_inputs():
            return [torch.randint(-8, 8, (4, 32), dtype=torch.int8)]


        def get_init_inputs():
            return []
    """,
}
TINY_COUNTS = {"rtx3090": 3, "h100": 3, "b200": 4}


def write_problems(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return root


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return write_problems(tmp_path / "problems", TINY)


@pytest.fixture
def tiny_build(tiny: Path, tmp_path: Path) -> Path:
    hub.build(tmp_path / "built", tiny, with_prompts=False)
    return tmp_path / "built"


# --- the real problems folder, built once in this process ----------------------------------
# (The real command, `kbv3 build` in a fresh process, is checked against it byte for byte in
# `test_the_real_command_builds_the_same_bytes`, which is slow: a fresh process imports torch.)


@pytest.fixture(scope="session")
def real_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hub") / "kbv3-problems"
    result = hub.build(out)
    assert result.counts == EXPECTED_COUNTS
    return out


@pytest.fixture(scope="session")
def fresh_load(real_build: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One fresh offline process loads the real build, a tiny build, and the tiny build with
    its card's front matter removed (one process: each costs seconds of imports)."""
    tmp = tmp_path_factory.mktemp("fresh")
    tiny = hub.build(tmp / "tiny", write_problems(tmp / "problems", TINY), with_prompts=False).out_dir
    stripped = tmp / "stripped"
    (stripped / "data").mkdir(parents=True)
    for split in hub.SPLITS:
        (stripped / hub.split_file(split)).write_bytes((tiny / hub.split_file(split)).read_bytes())
    (stripped / "README.md").write_text("# no front matter\n")
    result = load_in_fresh_process([real_build, tiny, stripped], tmp)
    return {
        "offline": result["offline"],
        "real": result[str(real_build)],
        "tiny": result[str(tiny)],
        "stripped": result[str(stripped)],
    }


@pytest.mark.slow
def test_kbv3_build_then_load_dataset_offline_in_fresh_process(fresh_load: dict):
    assert fresh_load["offline"] is True
    bundled = discover(PROBLEMS)
    for split, expected in EXPECTED_COUNTS.items():
        got = fresh_load["real"][split]
        assert got["num_rows"] == expected
        assert got["columns"][: len(COLUMNS)] == COLUMNS
        assert got["columns"][len(COLUMNS) :] == (["prompt"] if hub.prompt_renderer() else [])
        assert got["features_match_card"], "loaded features differ from the card's dataset_info"
        assert got["ids"] == [p.problem_id for p in bundled if split in p.gpus]  # catalog order
        assert all(split in gpus for gpus in got["gpus"])
        assert got["api_ids"] == got["ids"]


@pytest.mark.slow  # real_build: all 60 problems built, about 2 s (more under load) for the fast loop
def test_card_front_matter_is_what_datasets_reads(real_build: Path):
    import yaml

    text = (real_build / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    meta = yaml.safe_load(text.split("---\n", 2)[1])
    assert meta["license"] and meta["tags"]
    files = {f["split"]: f["path"] for f in meta["configs"][0]["data_files"]}
    assert files == {s: f"data/{s}.parquet" for s in EXPECTED_COUNTS}
    assert {s["name"]: s["num_examples"] for s in meta["dataset_info"]["splits"]} == EXPECTED_COUNTS
    body = text.split("---\n", 2)[2]
    for needed in ("## Columns", "## Splits", "## Scoring", "module_from_row", "Metal", "loading_script.py"):
        assert needed in body
    for column in COLUMNS:
        assert f"| `{column}` |" in body
    # Every row with a null names its reason, in the row and in the card.
    for split in EXPECTED_COUNTS:
        for row in read_rows(real_build, split):
            nulls = [k for k in ("output_spec", "flops", "bytes") if row[k] is None]
            assert bool(nulls) == bool(row["null_reason"]), row["problem_id"]
            if nulls:
                assert f"`{row['problem_id']}`" in body


@pytest.mark.slow  # real_build: all 60 problems built, about 2 s (more under load) for the fast loop
def test_specs_and_roofline_of_real_rows(real_build: Path):
    from kernelbench_v3.hardware.roofline import DEFAULT_ROOFLINE

    expected = {}
    for path in EXPECTED.glob("*.json"):
        for name, facts in json.loads(path.read_text()).items():
            expected[f"{path.stem}/{name}"] = facts
    for row in read_rows(real_build, "b200") + read_rows(real_build, "rtx3090"):
        assert row["sha256"] == hashlib.sha256(row["code"].encode()).hexdigest()
        assert row["code"] == (PROBLEMS / f"{row['problem_id']}.py").read_text(encoding="utf-8")
        assert (row["flops"], row["bytes"]) == tuple(DEFAULT_ROOFLINE[row["problem_id"]])
        facts = expected.get(row["problem_id"])
        if row["output_spec"] is not None and facts is not None:
            assert row["output_spec"] == {"shape": facts["default_shape"], "dtype": facts["dtype"]}
        assert row["input_specs"] and all(s["kind"] == "tensor" for s in row["input_specs"])
        json.loads(row["init_inputs"])


@pytest.mark.slow  # real_build: all 60 problems built, about 2 s (more under load) for the fast loop
def test_prompt_column_is_rendered_per_split(real_build: Path):
    if hub.prompt_renderer() is None:
        pytest.skip("kernelbench_v3.prompts is not installed: the build leaves the prompt column out")
    from kernelbench_v3.prompts.render import render

    bundled = {p.problem_id: p for p in discover(PROBLEMS)}
    by_split = {s: {r["problem_id"]: r["prompt"] for r in read_rows(real_build, s)} for s in EXPECTED_COUNTS}
    pid = "level1/1_Square_matrix_multiplication_"
    assert len({by_split[s][pid] for s in EXPECTED_COUNTS}) == 3  # one prompt per GPU
    assert by_split["h100"][pid] == render(bundled[pid], "h100")


@pytest.mark.slow  # a fresh process: imports torch, then builds every split
def test_the_real_command_builds_the_same_bytes(real_build: Path, tmp_path: Path):
    """`kbv3 build` in a fresh process gives the bytes of the build in this one: the build is
    deterministic across processes, and the command is the library's build."""
    out = tmp_path / "kbv3-problems"
    proc = subprocess.run(
        [*KBV3, "build", str(out)], env=offline_env(tmp_path), capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rtx3090: 43, h100: 54, b200: 58" in proc.stdout
    assert folder_bytes(out) == folder_bytes(real_build)


@pytest.mark.slow  # real_build (above); every problem's row is checked in the full suite
@pytest.mark.parametrize("problem", fast_sample(discover(PROBLEMS), lambda p: p.problem_id))
def test_every_row_runs_and_matches_the_problem_file_bit_for_bit(real_build: Path, problem):
    rows = [r for s in EXPECTED_COUNTS for r in read_rows(real_build, s) if r["problem_id"] == problem.problem_id]
    assert len(rows) == len(problem.gpus)
    for row in rows:
        assert hub.module_from_row(row).Model is not None  # every row materializes, even CPU-less ones
    if problem.cpu_unsupported:
        pytest.skip(f"{problem.problem_id}: {problem.cpu_unsupported}")
    seed = 1234
    reference = mat.instantiate(problem, "cpu", seed, sizes=problem.reduced)
    expected = reference.run()
    for row in rows:
        instance = hub.instantiate_row(row, "cpu", seed, sizes=problem.reduced)
        assert bitwise_equal(instance.run(), expected), f"{row['problem_id']} differs from problems/"
    # The meta-device specs agree with the real tensors (at reduced sizes).
    specs = problem_specs(mat.load_module(problem, problem.reduced))
    assert specs.input_specs == [value_spec(v) for v in reference.inputs]
    if specs.output_spec is not None:
        assert specs.output_spec == {"shape": list(expected.shape), "dtype": str(expected.dtype)[6:]}


# --- unit tests on the tiny folder ---------------------------------------------------------


def test_tiny_build_rows_splits_and_nulls(tiny_build: Path):
    counts = {s: len(read_rows(tiny_build, s)) for s in hub.SPLITS}
    assert counts == TINY_COUNTS
    rows = {r["problem_id"]: r for r in read_rows(tiny_build, "b200")}
    gemv = rows["tile_specialized/tiny_gemv"]
    assert gemv["level"] == 2 and gemv["gpus"] == ["h100", "b200"]
    assert gemv["input_specs"] == [{"kind": "tensor", "shape": [2, 16], "dtype": "float16", "value": None}]
    assert gemv["output_spec"] == {"shape": [2, 12], "dtype": "float16"}
    assert json.loads(gemv["init_inputs"]) == [16, 12]
    # Unknown to the roofline table: estimated on meta tensors (2*M*N*K; weights+bias+in+out bytes).
    assert gemv["flops"] == 2 * 2 * 12 * 16
    assert gemv["bytes"] == 2 * (12 * 16 + 12 + 2 * 16 + 2 * 12)
    item = rows["level1/2_Tiny_item"]
    assert item["output_spec"] is None and item["flops"] is None and item["bytes"] is None
    assert "item()" in item["null_reason"] and "flops/bytes are null" in item["null_reason"]
    assert item["input_specs"][1] == {"kind": "int", "shape": None, "dtype": None, "value": "2"}
    assert json.loads(item["init_inputs"]) == [0.5, [6, 3]]
    assert rows["level4/9_FP4_BlockScaled_Matmul"]["gpus"] == ["b200"]
    assert "`level1/2_Tiny_item`" in (tiny_build / "README.md").read_text()
    assert "prompt" not in pq.read_schema(tiny_build / hub.split_file("h100")).names


def test_tiny_build_is_deterministic_and_independent_of_location(tiny: Path, tiny_build: Path, tmp_path: Path):
    moved = write_problems(tmp_path / "elsewhere" / "problems", TINY)
    again = hub.build(tmp_path / "again", moved, with_prompts=False)
    assert folder_bytes(again.out_dir) == folder_bytes(tiny_build)
    assert b"timestamp" not in (tiny_build / "README.md").read_bytes()


@pytest.mark.slow  # fresh_load: a build loaded in a fresh process
def test_tiny_load_goes_through_the_card(fresh_load: dict):
    assert {s: v["num_rows"] for s, v in fresh_load["tiny"].items()} == TINY_COUNTS
    assert all(v["features_match_card"] for v in fresh_load["tiny"].values())
    # Without the card's `configs`, the per-GPU split names do not exist: the load used them.
    for split in hub.SPLITS:
        assert "error" in fresh_load["stripped"][split]
        assert split in fresh_load["stripped"][split]["error"]


MALFORMED = {
    "missing Model": (
        "level2/5_No_model.py",
        "OP_TYPE = 'gemm'\nSUPPORTED_PRECISIONS = ['fp32']\n"
        "HARDWARE_REQUIRED = ['H100']\ndef get_inputs():\n    return []\n"
        "def get_init_inputs():\n    return []\n",
        "missing required definition(s): Model",
    ),
    "get_inputs raises": (
        "level2/6_Bad_inputs.py",
        TINY["level1/1_Tiny_matmul.py"].replace(
            "return [torch.randn(N, N), torch.randn(N, N)]", "return [torch.randn(N, undefined_name)]"
        ),
        "get_inputs() raised on the meta device: NameError",
    ),
    "import fails": (
        "level2/7_Bad_import.py",
        "import not_a_real_module_kbv3\n" + textwrap.dedent(TINY["level1/1_Tiny_matmul.py"]),
        "importing it raised ModuleNotFoundError",
    ),
}


@pytest.mark.parametrize("defect", sorted(MALFORMED))
def test_malformed_problem_is_named_and_nothing_is_written(tiny: Path, tmp_path: Path, defect: str, capsys):
    from kernelbench_v3.cli.main import main

    rel, text, message = MALFORMED[defect]
    write_problems(tiny, {rel: text})
    out = tmp_path / "out"
    with pytest.raises(CatalogError) as err:
        hub.build(out, tiny, with_prompts=False)
    assert str(tiny / rel) in str(err.value) and message in str(err.value)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["problems"]  # no staging folder left
    # The command says the same on stderr and fails. In this process: what a fresh process adds
    # (the offline start) is `test_the_real_command_builds_the_same_bytes`'s, and a process
    # costs about 2 s of imports in the fast loop (issue 41, item 8).
    capsys.readouterr()
    assert main(["build", str(out), "--problems", str(tiny), "--no-prompts"]) == 1
    assert message in capsys.readouterr().err and not out.exists()


def test_failed_rebuild_keeps_the_previous_build(tiny: Path, tiny_build: Path):
    before = folder_bytes(tiny_build)
    with pytest.raises(FileExistsError, match="not empty"):
        hub.build(tiny_build, tiny, with_prompts=False)
    write_problems(tiny, {MALFORMED["missing Model"][0]: MALFORMED["missing Model"][1]})
    with pytest.raises(CatalogError):
        hub.build(tiny_build, tiny, overwrite=True, with_prompts=False)
    assert folder_bytes(tiny_build) == before
    (tiny / MALFORMED["missing Model"][0]).unlink()
    hub.build(tiny_build, tiny, overwrite=True, with_prompts=False)
    assert folder_bytes(tiny_build) == before


def test_row_whose_code_does_not_match_its_sha256_is_refused(tiny_build: Path):
    row = read_rows(tiny_build, "h100")[0]
    assert hub.module_from_row(row).N == 8
    tampered = dict(row, code=row["code"].replace("return a @ b", "return a @ b * 0"))
    for call in (hub.module_from_row, lambda r: hub.instantiate_row(r, "cpu", 0)):
        with pytest.raises(hub.RowIntegrityError, match=r"level1/1_Tiny_matmul.*does not match its sha256"):
            call(tampered)


def test_instantiate_row_with_sizes_matches_the_file(tiny: Path, tiny_build: Path):
    row = next(r for r in read_rows(tiny_build, "rtx3090") if r["name"] == "1_Tiny_matmul")
    got = hub.instantiate_row(row, "cpu", seed=3, sizes={"N": 4})
    want = mat.instantiate(tiny / "level1" / "1_Tiny_matmul.py", "cpu", 3, sizes={"N": 4})
    assert got.inputs[0].shape == (4, 4)
    assert bitwise_equal(got.run(), want.run())


def test_load_problems_rejects_bad_arguments_before_touching_datasets(tmp_path: Path):
    with pytest.raises(ValueError, match="unknown split 'a100'"):
        hub.load_problems("a100", tmp_path)
    with pytest.raises(FileNotFoundError, match="not a built dataset folder"):
        hub.load_problems("h100", tmp_path)


class FakeHfApi:
    calls: list = []

    def __init__(self, token=None):
        FakeHfApi.calls.append(("init", token))

    def create_repo(self, repo_id, **kwargs):
        FakeHfApi.calls.append(("create_repo", repo_id, kwargs))

    def upload_folder(self, **kwargs):
        FakeHfApi.calls.append(("upload_folder", kwargs))
        return "commit-info"


def test_push_to_hub_up_to_the_network_call(tiny_build: Path, monkeypatch: pytest.MonkeyPatch):
    import huggingface_hub

    FakeHfApi.calls = []
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeHfApi)
    assert hub.push_to_hub(tiny_build, "me/kb3", token="tok", delete_patterns=["*.py"]) == "commit-info"
    assert FakeHfApi.calls[0] == ("init", "tok")
    assert FakeHfApi.calls[1] == ("create_repo", "me/kb3", {"repo_type": "dataset", "private": None, "exist_ok": True})
    upload = FakeHfApi.calls[2][1]
    assert upload["repo_id"] == "me/kb3" and upload["repo_type"] == "dataset"
    assert upload["folder_path"] == str(tiny_build) and upload["delete_patterns"] == ["*.py"]


def test_push_to_hub_refuses_a_tampered_or_incomplete_folder(tiny_build: Path, monkeypatch: pytest.MonkeyPatch):
    import huggingface_hub
    import pyarrow as pa

    FakeHfApi.calls = []
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeHfApi)
    path = tiny_build / hub.split_file("b200")
    table = pq.read_table(path)
    codes = table.column("code").to_pylist()
    codes[1] = codes[1] + "\n# edited\n"
    pq.write_table(table.set_column(table.schema.get_field_index("code"), "code", pa.array(codes)), path)
    with pytest.raises(hub.RowIntegrityError, match="b200.parquet"):
        hub.push_to_hub(tiny_build, "me/kb3")
    path.unlink()
    with pytest.raises(FileNotFoundError, match="data/b200.parquet is missing"):
        hub.push_to_hub(tiny_build, "me/kb3")
    assert FakeHfApi.calls == []
