"""What a user sees from the command line (issue 22): `--gpu` and `--split` name the same
splits, `eval-batch` treats a mistyped solution name as `eval` does, `kbv3 runs` offline fails
at once with the way forward, the batch summary names each failure, and no lock file is left."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelbench_v3.batch.journal import Journal
from kernelbench_v3.batch.queue import BatchSettings
from kernelbench_v3.batch.run import BatchResult, describe_batch
from kernelbench_v3.cli.main import main
from kernelbench_v3.evaluate.options import EvalOptions
from tests.paths import EXAMPLES, PROBLEMS, PUBLISHED, REPO

SOFTMAX = EXAMPLES / "level1" / "23_Softmax.py"


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


# ---------------------------------------------------------------- point 6: --gpu names a split


def test_gpu_h200_is_refused_as_ls_split_h200_is(capsys):
    code, _, err = run(["eval", "--problem", "level1/23_Softmax", "--solution", str(SOFTMAX), "--gpu", "h200"], capsys)
    assert code == 2
    line = one_line(err)
    assert "argument --gpu" in line and "'h200' is not a split" in line and "rtx3090, h100, b200" in line
    code, _, err = run(["ls", "--split", "h200"], capsys)
    assert code == 2 and "h200" in one_line(err)


def test_eval_help_lists_the_splits_only(capsys):
    code, out, _ = run(["eval", "--help"], capsys)
    assert code == 0
    help_text = " ".join(out.split())
    assert "rtx3090, h100 or b200" in help_text and "h200" not in help_text and "ran_on" in help_text


def test_gpu_takes_the_runs_datasets_spelling_too():
    from kernelbench_v3.cli.args import split_name

    assert split_name("H100") == "h100" and split_name("RTX 3090") == "rtx3090" and split_name("b200") == "b200"


# ---------------------------------------------------------------- point 7: eval-batch typos


def test_eval_batch_mistyped_solution_name_is_usage_with_did_you_mean(tmp_path, capsys):
    folder = tmp_path / "sols"
    (folder / "level1").mkdir(parents=True)
    (folder / "level1" / "26_GELU.py").write_text("x = 1\n")
    out = tmp_path / "out.parquet"
    code, stdout, err = run(
        ["eval-batch", str(folder), "--split", "h100", "--out", str(out), "--device", "cpu", "--no-progress"], capsys
    )
    assert code == 2 and stdout == ""
    line = one_line(err)
    assert "26_GELU.py" in line and "did you mean level1/26_GELU_?" in line
    assert not out.exists() and not list(tmp_path.glob("out.parquet*"))  # nothing written
    # the runs dataset's layout gets the same suggestion
    (folder / "level1" / "26_GELU.py").unlink()
    (folder / "model_H100_26_GELU.py.txt").write_text("x = 1\n")
    code, _, err = run(["eval-batch", str(folder), "--split", "h100", "--out", str(out), "--device", "cpu"], capsys)
    assert code == 2 and "did you mean 26_GELU_?" in one_line(err)


# ---------------------------------------------------------------- point 8: offline runs


@pytest.mark.parametrize("action", ["summary", "anomalies"])
def test_runs_without_source_offline_fails_at_once_naming_the_fixture(action, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = time.monotonic()
    code, out, err = run(["runs", action], capsys)
    assert time.monotonic() - started < 5
    assert code == 2 and out == ""
    line = one_line(err)
    assert "HF_HUB_OFFLINE is set" in line and "--source PATH" in line and "results.csv" in line
    assert str(PUBLISHED) in line


def test_runs_without_source_and_no_network_fails_at_once(capsys, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)  # either switch means offline (hub_reach)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    started = time.monotonic()
    code, _, err = run(["runs", "summary"], capsys)
    assert time.monotonic() - started < 6
    line = one_line(err)
    assert code == 2 and "127.0.0.1 cannot be reached" in line and str(PUBLISHED) in line


def test_the_offline_hint_works_when_followed(capsys):
    code, out, _ = run(["runs", "summary", "--source", str(PUBLISHED)], capsys)
    assert code == 0 and "Model A" in out


# ---------------------------------------------------------------- point 5: the batch summary


def test_batch_summary_lists_each_failure_in_one_line(tmp_path):
    records = [
        {"problem_id": "level1/23_Softmax", "model": "m", "status": "correct", "error": None},
        {
            "problem_id": "level1/26_GELU_",
            "model": "m",
            "status": "incorrect",
            "failed_check": "correctness",
            "error": "seed42: max abs error 0.5 exceeds allclose\nmore detail",
        },
        {
            "problem_id": "level1/40_LayerNorm",
            "model": "m",
            "status": "failed",
            "failed_check": "import",
            "error": "SyntaxError: expected ':' (solution.py, line 3)",
        },
    ]
    result = BatchResult(tmp_path / "o.parquet", tmp_path / "j", records, 3, 0, [], 1.0)
    text = describe_batch(result)
    assert "3 records (1 correct, 1 failed, 1 incorrect)" in text
    assert (
        "  level1/26_GELU_ (m): incorrect, failed check correctness: seed42: max abs error 0.5 exceeds allclose\n"
        in text + "\n"
    )
    assert (
        "  level1/40_LayerNorm (m): failed, failed check import: SyntaxError: expected ':' (solution.py, line 3)"
        in text
    )
    assert "more detail" not in text and "23_Softmax" not in text


# ---------------------------------------------------------------- point 10: no lock file left


def test_the_journal_lock_file_is_removed_when_the_batch_ends(tmp_path):
    settings = BatchSettings(split="h100", device="cpu", problems_root=str(PROBLEMS), options=EvalOptions())
    path = tmp_path / "out.parquet.journal.jsonl"
    journal = Journal(path, settings)
    journal.open()
    assert journal.lock_path.exists()
    with pytest.raises(Exception, match="in use by another running batch"):
        Journal(path, settings).open()
    journal.close()
    assert not journal.lock_path.exists() and path.exists()
    with Journal(path, settings):  # reopened (resume) and closed again
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_a_lock_held_by_another_process_still_excludes(tmp_path):
    settings = BatchSettings(split="h100", device="cpu", problems_root=str(PROBLEMS), options=EvalOptions())
    path = tmp_path / "j.jsonl"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            f"sys.path.insert(0, {str(REPO)!r})\n"
            "from kernelbench_v3.batch.journal import Journal\n"
            "from kernelbench_v3.batch.queue import BatchSettings\n"
            "from kernelbench_v3.evaluate.options import EvalOptions\n"
            f"s = BatchSettings(split='h100', device='cpu', problems_root={str(PROBLEMS)!r}, options=EvalOptions())\n"
            f"j = Journal(__import__('pathlib').Path({str(path)!r}), s); j.open(); print('held', flush=True)\n"
            "sys.stdin.readline(); j.close()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(Exception, match="in use"):
            Journal(path, settings).open()
    finally:
        holder.communicate("\n", timeout=30)
    assert not Path(str(path) + ".lock").exists()
    with Journal(path, settings):
        pass
