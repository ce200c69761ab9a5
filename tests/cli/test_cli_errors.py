"""A user's mistake on the `kbv3` command line gives one line on stderr, never a traceback.

Every verb with wrong values: the message names the flag (or file) that is wrong and what to do,
the exit code is the documented one (0 ok, 1 evaluated-but-failed, 2 usage, 130 interrupted,
141 closed stdout) and nothing is left half-written. All offline and GPU-free: CUDA is made to
look absent where a test needs a machine without a GPU.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelbench_v3.cli.main import EXIT_CODES, main
from tests.paths import EXAMPLES, PROBLEMS, PUBLISHED, REPO, RUNS_FIXTURES

SOFTMAX = EXAMPLES / "level1" / "23_Softmax.py"
EVAL_RECORD = RUNS_FIXTURES / "eval_record.json"


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `kbv3 argv`, whether main returns or argparse exits."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line(err: str) -> str:
    """The single stderr line (asserting there is exactly one and no traceback)."""
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def no_cuda(monkeypatch):
    """This machine as one without a CUDA GPU, whatever it really has."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


@pytest.fixture
def small_problems(tmp_path) -> Path:
    root = tmp_path / "problems"
    (root / "level1").mkdir(parents=True)
    shutil.copy(PROBLEMS / "level1" / "23_Softmax.py", root / "level1")
    return root


def _spawn(args: list[str], **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "kernelbench_v3.cli", *args], cwd=REPO, env=env, **kwargs)


# ---------------------------------------------------------------- the list, one test each


@pytest.mark.parametrize(
    "args",
    [
        ["ls"],
        # A fresh process that imports pandas and the runs wing: over 2 s on a loaded machine.
        pytest.param(["runs", "summary", "--json", "--source", str(PUBLISHED)], marks=pytest.mark.slow),
    ],
)
def test_closed_stdout_is_quiet_not_a_broken_pipe_traceback(args):
    # `kbv3 ls | head -1`: the reader is gone before kbv3 writes.
    proc = _spawn(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_build_into_a_folder_that_cannot_be_written(tmp_path, small_problems, monkeypatch, capsys):
    import kernelbench_v3.dataset.hub as hub

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(kwargs.get("dir", "")))

    monkeypatch.setattr(hub.tempfile, "mkdtemp", refuse)
    out = tmp_path / "ro" / "hub"
    (tmp_path / "ro").mkdir()
    code, _, err = run(["build", str(out), "--problems", str(small_problems)], capsys)
    assert code == 2
    line = one_line(err)
    assert str(out) in line and "Permission denied" in line and "writable" in line
    assert not any((tmp_path / "ro").iterdir())


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into read-only folders")
def test_build_into_a_read_only_folder_is_refused_up_front(tmp_path, small_problems, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        code, _, err = run(["build", str(ro / "hub"), "--problems", str(small_problems)], capsys)
    finally:
        ro.chmod(0o755)
    assert code == 2 and "not writable" in one_line(err)
    assert not any(ro.iterdir())


@pytest.mark.parametrize("verb", ["ls", "validate", "build", "prompts"])
def test_a_missing_problems_folder(verb, tmp_path, capsys):
    extra = {"build": [str(tmp_path / "out")], "prompts": ["--split", "h100", "--out", str(tmp_path / "p.jsonl")]}
    code, _, err = run([verb, *extra.get(verb, []), "--problems", str(tmp_path / "missing")], capsys)
    assert code == 2
    line = one_line(err)
    assert "--problems" in line and "does not exist" in line
    assert not (tmp_path / "out").exists() and not (tmp_path / "p.jsonl").exists()


def test_eval_batch_gpus_that_are_not_numbers(tmp_path, capsys):
    code, _, err = run(
        [
            "eval-batch",
            str(EXAMPLES),
            "--split",
            "h100",
            "--out",
            str(tmp_path / "r.parquet"),
            "--gpus",
            "a,b",
        ],
        capsys,
    )
    assert code == 2 and "argument --gpus: 'a' is not a GPU index" in one_line(err)


def test_eval_batch_on_cuda_without_a_gpu_creates_nothing(tmp_path, no_cuda, capsys):
    out = tmp_path / "r.parquet"
    argv = [
        "eval-batch",
        str(EXAMPLES),
        "--split",
        "h100",
        "--out",
        str(out),
        "--device",
        "cuda",
    ]
    code, _, err = run(argv, capsys)
    assert code == 2
    line = one_line(err)
    assert "no CUDA GPU is visible" in line and "--device cpu" in line
    assert list(tmp_path.iterdir()) == []  # no Parquet, no journal to refuse the corrected command


def test_eval_batch_gpus_on_a_cpu_only_machine(tmp_path, no_cuda, capsys):
    code, _, err = run(
        [
            "eval-batch",
            str(EXAMPLES),
            "--split",
            "h100",
            "--out",
            str(tmp_path / "r.parquet"),
            "--gpus",
            "0,1",
        ],
        capsys,
    )
    assert code == 2
    line = one_line(err)
    assert "--gpus 0,1" in line and "no CUDA GPU" in line
    assert list(tmp_path.iterdir()) == []


def test_eval_on_cuda_without_a_gpu(no_cuda, capsys):
    code, _, err = run(
        ["eval", "--problem", "level1/23_Softmax", "--solution", str(SOFTMAX), "--device", "cuda"], capsys
    )
    assert code == 2
    line = one_line(err)
    assert "no CUDA GPU is visible" in line and "use --device cpu" in line


def test_eval_unknown_gpu_lists_the_choices(capsys):
    code, _, err = run(["eval", "--problem", "level1/23_Softmax", "--solution", str(SOFTMAX), "--gpu", "a100"], capsys)
    assert code == 2
    line = one_line(err)
    assert "argument --gpu" in line and "'a100'" in line
    assert all(name in line for name in ("rtx3090", "h100", "b200"))


def test_eval_problem_not_in_the_split(capsys):
    code, _, err = run(
        [
            "eval",
            "--problem",
            "level4/9_FP4_BlockScaled_Matmul",
            "--solution",
            str(SOFTMAX),
            "--gpu",
            "h100",
            "--device",
            "cpu",
        ],
        capsys,
    )
    assert code == 2
    line = one_line(err)
    assert "not in the h100 split" in line and "--gpu b200" in line


def test_ctrl_c_during_eval_is_one_line_and_130(monkeypatch, capsys):
    import kernelbench_v3.evaluate as evaluate_pkg

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(evaluate_pkg, "evaluate", interrupted)
    code, _, err = run(
        ["eval", "--problem", "level1/23_Softmax", "--solution", str(SOFTMAX), "--device", "cpu"], capsys
    )
    assert code == 130 and one_line(_without_progress(err)) == "kbv3 eval: interrupted"


@pytest.mark.slow
def test_sigint_to_a_running_eval_process_even_twice(tmp_path):
    # A solution whose forward never returns keeps the evaluation running until the signal comes,
    # however fast or loaded the machine is.
    proc = _spawn(
        [
            "eval",
            "--problem",
            "level1/23_Softmax",
            "--solution",
            str(REPO / "tests" / "solutions" / "broken" / "hang.py"),
            "--device",
            "cpu",
            "--timeout",
            "300",
            "--cache",
            str(tmp_path / "cache"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # A shell starts background jobs with SIGINT ignored, and Python keeps an ignored SIGINT:
        # give the command the default disposition a terminal would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while not _children(proc.pid) and time.monotonic() < deadline:  # the evaluation has begun
        time.sleep(0.2)
    assert _children(proc.pid), "the evaluation never started a child process"
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    # A second Ctrl-C while the process is on its way out (after the report, during the clean-up
    # that follows) must not turn the promised 130 into death by the signal.
    first_line = proc.stderr.readline()
    while _is_progress(first_line.decode()):  # the lines `kbv3 eval` says while it runs
        first_line = proc.stderr.readline()
    try:
        proc.send_signal(signal.SIGINT)
    except ProcessLookupError:
        pass
    out, err = proc.communicate(timeout=120)
    err = first_line + err
    assert proc.returncode == 130, (out, err)
    assert one_line(err.decode()) == "kbv3 eval: interrupted"


def _is_progress(line: str) -> bool:
    return line.startswith("kbv3 eval: evaluating ") or "still running (" in line


def _without_progress(err: str) -> str:
    return "\n".join(line for line in err.splitlines() if not _is_progress(line))


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


@pytest.mark.parametrize(
    "flag, value, expected",
    [
        ("--seeds", "abc", "argument --seeds: 'abc' is not an integer seed"),
        ("--seeds", ",", "argument --seeds: no seeds given"),
        ("--seeds", "-1", "argument --seeds"),
        ("--timeout", "0", "argument --timeout: must be positive (a number of seconds), got 0"),
        ("--timeout", "soon", "argument --timeout: expected a number of seconds"),
        ("--timing-seconds", "-2", "argument --timing-seconds"),
        ("--sizes", "dim=-4", "argument --sizes: dim=-4: dim is a size (default 16384) and must be a positive integer"),
        ("--sizes", "dim=2.5", "argument --sizes: dim=2.5"),
        ("--sizes", "dim", "argument --sizes: 'dim' is not NAME=VALUE"),
        ("--sizes", "dim=big", "argument --sizes: 'dim=big'"),
        ("--tolerance", "loose", "argument --tolerance: invalid choice"),
        ("--device", "tpu", "argument --device: invalid choice"),
    ],
)
def test_eval_bad_values_name_their_flag(flag, value, expected, capsys):
    code, _, err = run(
        ["eval", "--problem", "level1/23_Softmax", "--solution", str(SOFTMAX), "--device", "cpu", flag, value], capsys
    )
    assert code == 2
    assert expected in one_line(err)


def test_eval_sizes_of_another_problem_list_the_valid_variables(capsys):
    code, _, err = run(
        ["eval", "--problem", "level1/23_Softmax", "--solution", str(SOFTMAX), "--device", "cpu", "--sizes", "N=64"],
        capsys,
    )
    assert code == 2
    line = one_line(err)
    assert "argument --sizes" in line and "no size variable N" in line
    assert "batch_size=256" in line and "dim=16384" in line


def test_readme_synopsis_sizes_are_valid_for_its_problem():
    readme = (REPO / "README.md").read_text()
    synopsis = next(line for line in readme.splitlines() if line.startswith("kbv3 eval --problem"))
    assert "level1/23_Softmax" in synopsis and "--sizes N=64" not in synopsis
    from kernelbench_v3.cli.args import check_eval_problem

    sizes = synopsis.split("--sizes ", 1)[1].split("]", 1)[0]
    from kernelbench_v3.cli.args import sizes_text

    assert check_eval_problem("level1/23_Softmax", "h100", sizes_text(sizes), None)


@pytest.mark.parametrize(
    "given, suggested",
    [
        ("23_Softmax", "level1/23_Softmax"),
        ("level1/23_softmax.py", "level1/23_Softmax"),
        ("level1/40_LayerNrm", "level1/40_LayerNorm"),
    ],
)
def test_unknown_problem_suggests_the_near_match(given, suggested, capsys):
    code, _, err = run(["eval", "--problem", given, "--solution", str(SOFTMAX), "--device", "cpu"], capsys)
    assert code == 2
    line = one_line(err)
    assert f"did you mean {suggested}" in line and "KeyError" not in line and '"' not in line


def test_header_only_runs_csv(tmp_path, capsys):
    csv = tmp_path / "results.csv"
    csv.write_text((PUBLISHED / "results.csv").read_text().splitlines()[0] + "\n")
    for action in ("summary", "anomalies"):
        code, out, err = run(["runs", action, "--source", str(csv)], capsys)
        assert code == 2 and out == ""
        line = one_line(err)
        assert str(csv) in line and "a header and no rows" in line


def test_records_of_a_plain_eval_json_are_runs(capsys):
    # `kbv3 eval --json > rec.json` with no --model: the record's model is empty.
    code, out, err = run(["runs", "summary", "--source", str(EVAL_RECORD), "--json"], capsys)
    assert code == 0, err
    import json

    board = json.loads(out)["leaderboard"]
    assert [(r["model"], r["gpu"], r["correct"]) for r in board] == [("(unnamed)", "H100", 1)]


def test_version(capsys):
    from kernelbench_v3 import __version__

    code, out, _ = run(["--version"], capsys)
    assert code == 0 and out.strip() == f"kbv3 (kernelbench-v3) {__version__}"


# ---------------------------------------------------------------- every verb, more wrong values


def test_exit_codes_are_documented_in_the_readme():
    readme = (REPO / "README.md").read_text()
    assert "## Exit codes" in readme
    for code in EXIT_CODES:
        assert f"| {code} |" in readme


@pytest.mark.parametrize(
    "argv, expected",
    [
        ([], "the following arguments are required: VERB"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["ls", "--split", "a100"], "argument --split: 'a100' is not a split"),
        (["ls", "--problems", "/"], "is not a problems folder"),
        (["prompts", "--split", "h100"], "the following arguments are required: --out"),
        (["runs", "everything"], "argument action: invalid choice"),
        (["eval", "--solution", "x.py"], "the following arguments are required: --problem"),
        (
            ["eval-batch", "sols", "--split", "h100", "--out", "o.parquet", "--workers", "0"],
            "argument --workers: must be at least 1",
        ),
        (
            ["eval-batch", "sols", "--split", "h100", "--out", "o.parquet", "--gpus", "0,0"],
            "argument --gpus: GPU 0 is listed twice",
        ),
        (["eval-batch", "sols", "--split", "h100", "--out", "o.parquet", "--timeout", "-1"], "argument --timeout"),
        (["eval-batch", "sols", "--split", "h100", "--out", "o.parquet", "--seeds", "x"], "argument --seeds"),
        (
            ["eval-batch", "sols", "--split", "h100", "--out", "o.parquet", "--shapes", "tiny"],
            "argument --shapes: invalid choice",
        ),
        (["demo", "--split", "a100"], "argument --split: 'a100' is not a split"),
    ],
)
def test_usage_errors_are_one_line(argv, expected, capsys):
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    line = one_line(err)
    assert expected in line and "--help" in line


def test_eval_missing_solution_file(tmp_path, capsys):
    code, _, err = run(["eval", "--problem", "level1/23_Softmax", "--solution", str(tmp_path / "nope.py")], capsys)
    assert code == 2 and "argument --solution" in one_line(err)


def test_eval_problems_folder_without_the_problem(small_problems, capsys):
    code, _, err = run(
        [
            "eval",
            "--problem",
            "level1/40_LayerNorm",
            "--solution",
            str(SOFTMAX),
            "--problems",
            str(small_problems),
            "--device",
            "cpu",
        ],
        capsys,
    )
    assert code == 2 and "no problem 'level1/40_LayerNorm'" in one_line(err)


@pytest.mark.parametrize(
    "extra, expected",
    [
        (["--device", "cpu", "--gpus", "0"], "argument --gpus: only used with --device cuda"),
        (["--address", "ray://head:10001"], "argument --address: only used with --executor ray"),
    ],
)
def test_eval_batch_contradicting_flags(extra, expected, tmp_path, capsys):
    code, _, err = run(
        [
            "eval-batch",
            str(EXAMPLES),
            "--split",
            "h100",
            "--out",
            str(tmp_path / "r.parquet"),
            *extra,
        ],
        capsys,
    )
    assert code == 2 and expected in one_line(err)
    assert list(tmp_path.iterdir()) == []


def test_eval_batch_gpu_index_beyond_the_machine(tmp_path, monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    code, _, err = run(
        [
            "eval-batch",
            str(EXAMPLES),
            "--split",
            "h100",
            "--out",
            str(tmp_path / "r.parquet"),
            "--gpus",
            "1,2",
        ],
        capsys,
    )
    assert code == 2 and "no GPU 2; this machine has 2 (indices 0-1)" in one_line(err)


def test_eval_batch_missing_solutions_folder(tmp_path, capsys):
    code, _, err = run(
        [
            "eval-batch",
            str(tmp_path / "sols"),
            "--split",
            "h100",
            "--device",
            "cpu",
            "--out",
            str(tmp_path / "r.parquet"),
        ],
        capsys,
    )
    assert code == 2 and "solutions folder" in one_line(err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("verb", ["eval-batch", "prompts", "extract", "build", "demo"])
def test_outputs_under_a_file_are_refused_before_any_work(verb, tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    response = tmp_path / "response.md"
    response.write_text("```python\nclass Model:\n    pass\n```\n")
    argv = {
        "eval-batch": [
            "eval-batch",
            str(EXAMPLES),
            "--split",
            "h100",
            "--device",
            "cpu",
            "--out",
            str(blocker / "r.parquet"),
        ],
        "prompts": ["prompts", "--split", "h100", "--out", str(blocker / "p.jsonl")],
        "extract": ["extract", str(response), "--out", str(blocker / "solution.py")],
        "build": ["build", str(blocker / "hub")],
        "demo": ["demo", "--out", str(blocker / "out"), "--device", "cpu"],
    }[verb]
    code, _, err = run(argv, capsys)
    assert code == 2
    line = one_line(err)
    assert "cannot write" in line and "is not a folder" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "response.md"]


def test_extract_missing_response(tmp_path, capsys):
    code, _, err = run(["extract", str(tmp_path / "nope.md"), "--out", str(tmp_path / "s.py")], capsys)
    assert code == 2 and "does not exist" in one_line(err)


def test_build_into_a_non_empty_folder(tmp_path, small_problems, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("x")
    code, _, err = run(["build", str(tmp_path / "out"), "--problems", str(small_problems)], capsys)
    assert code == 2 and "--overwrite" in one_line(err)


def test_demo_cuda_without_a_gpu(tmp_path, no_cuda, capsys):
    code, _, err = run(["demo", "--out", str(tmp_path / "out"), "--device", "cuda"], capsys)
    assert code == 2 and "use --device cpu" in one_line(err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "name, content, expected",
    [
        ("missing.csv", None, "does not exist"),
        ("results.txt", "a,b\n", "unsupported runs file type"),
        ("records.json", "[1, 2]", "expected a JSON object"),
        ("records.jsonl", "{not json\n", "line 1: not valid JSON"),
    ],
)
def test_runs_sources_that_cannot_be_read(name, content, expected, tmp_path, capsys):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    code, out, err = run(["runs", "summary", "--source", str(path)], capsys)
    assert code == 2 and out == ""
    assert expected in one_line(err)


def test_runs_schema_errors_exit_1_and_name_the_row(capsys):
    code, _, err = run(["runs", "summary", "--source", str(RUNS_FIXTURES / "bad_rows.csv")], capsys)
    assert code == 1 and "Traceback" not in err and "row" in err


@pytest.mark.parametrize(
    "command",
    [
        ["eval", "--problem", "level1/23_Softmax", "--solution", "s.py"],
        ["eval-batch", "solutions", "--split", "h100", "--out", "r.parquet"],
    ],
)
def test_cli_rejects_a_timing_budget_that_is_not_positive(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(command + ["--timing-seconds", "0"])
    assert exit_info.value.code == 2 and "--timing-seconds: must be positive" in capsys.readouterr().err
