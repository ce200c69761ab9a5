"""`eval-batch --only` and `--limit` (issue 41, item 5): `--only` means problem ids, as in every
verb; `--limit N` the first N problems; every sample of a chosen problem stays in; an id outside
the split or without a solution is one usage line and nothing is written; the help names each
flag's default."""

from __future__ import annotations

import pytest

from kernelbench_v3.batch.discover import BatchError, UnknownSolutionError, discover_solutions, select_problems
from kernelbench_v3.batch.queue import BatchSettings
from kernelbench_v3.batch.run import describe_batch, run_batch
from kernelbench_v3.cli.main import main
from tests.batch.test_batch import _touch, fake_evaluate
from tests.paths import PROBLEMS

NAMES = ("23_Softmax", "26_GELU_", "40_LayerNorm")


def _folder(tmp_path):
    folder = tmp_path / "sols"
    for name in NAMES:
        _touch(folder / "level1" / f"{name}.py", "fine")
    return folder


def test_only_and_limit_pick_problems(tmp_path):
    found = discover_solutions(_folder(tmp_path), "h100", PROBLEMS)
    picked, left_out = select_problems(found, "h100", PROBLEMS, only=["level1/40_LayerNorm", "level1/23_Softmax"])
    assert sorted(it.problem_id for it in picked.items) == ["level1/23_Softmax", "level1/40_LayerNorm"]
    assert left_out == 1
    first, left_out = select_problems(found, "h100", PROBLEMS, limit=2)
    assert [it.problem_id for it in first.items] == [it.problem_id for it in found.items][:2] and left_out == 1
    both, _ = select_problems(found, "h100", PROBLEMS, only=["level1/40_LayerNorm", "level1/23_Softmax"], limit=1)
    assert len(both.items) == 1
    with pytest.raises(UnknownSolutionError, match="--only: level1/23_Softmaxx not in the h100 split.*23_Softmax"):
        select_problems(found, "h100", PROBLEMS, only=["level1/23_Softmaxx"])
    with pytest.raises(UnknownSolutionError, match="--only: no solution of level1/36_RMSNorm_ in this folder"):
        select_problems(found, "h100", PROBLEMS, only=["level1/36_RMSNorm_"])


@pytest.mark.slow  # a worker process starts: about 2.5 s
def test_a_narrowed_batch_evaluates_only_those_and_says_what_it_left_out(tmp_path):
    settings = BatchSettings(split="h100", device="cpu", problems_root=str(PROBLEMS))
    out = tmp_path / "out.parquet"
    result = run_batch(
        _folder(tmp_path), out, settings, evaluate_fn=fake_evaluate, progress=False, only=["level1/26_GELU_"]
    )
    assert [r["problem_id"] for r in result.records] == ["level1/26_GELU_"] and result.ran == 1
    assert "left out 2 solution(s) of other problems (--only / --limit)" in describe_batch(result)


def test_the_command_line_takes_only_and_limit_and_refuses_an_unknown_id(tmp_path, capsys, monkeypatch):
    folder, out = _folder(tmp_path), tmp_path / "o.parquet"
    base = ["eval-batch", str(folder), "--split", "h100", "--out", str(out), "--device", "cpu"]
    assert main(base + ["--only", "level1/99_Nothing"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kbv3 eval-batch: argument --only: level1/99_Nothing not in the h100 split")
    assert not list(tmp_path.glob("o.parquet*"))  # refused before anything was written
    seen = {}

    def fake_run_batch(solutions, out, settings, **kwargs):
        seen.update(kwargs)
        raise BatchError("stopped by the test")  # what reached the batch is what the test checks

    monkeypatch.setattr("kernelbench_v3.batch.run.run_batch", fake_run_batch)
    assert main(base + ["--only", "level1/23_Softmax,level1/26_GELU_", "--limit", "1"]) == 1
    assert seen["only"] == ("level1/23_Softmax", "level1/26_GELU_") and seen["limit"] == 1


def test_eval_batch_help_names_only_limit_and_every_default(capsys):
    with pytest.raises(SystemExit):
        main(["eval-batch", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--only ID,..." in text and "--limit N" in text and "only the first N problems" in text
    assert (
        "on CUDA, per GPU of --gpus (default: 2, and 1 for --split rtx3090" in text
        and "on --device cpu, in all (default: 1)" in text
    )
    assert "ray: one Ray task per evaluation" in text and "(default: local)" in text
