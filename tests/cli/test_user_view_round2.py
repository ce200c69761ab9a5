"""What a user sees from the command line, round 2 (issue 29, points 5-8, 11, 13): no silent
wait, help that restates no default, outputs that match their names, the exit codes the README
promises, one meaning per flag, and error lines that name what the user gave."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

from kernelbench_v3.batch.progress import Progress
from kernelbench_v3.batch.run import BatchResult
from kernelbench_v3.cli.main import main
from tests.paths import EXAMPLES

SOFTMAX = EXAMPLES / "level1" / "23_Softmax.py"


def run(argv, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---------------------------------------------------------------- point 5: no silent wait


def test_eval_says_it_started_and_that_it_is_still_running(monkeypatch, capsys):
    from kernelbench_v3.evaluate.record import Record

    def slow(request, **kwargs):
        time.sleep(0.35)
        return Record(problem_id=request.problem_id, status="correct", correct=True, device="cpu")

    monkeypatch.setattr("kernelbench_v3.evaluate.evaluate", slow)
    monkeypatch.setattr("kernelbench_v3.cli.heartbeat.HEARTBEAT_S", 0.1)
    code, out, err = run(
        ["eval", "--problem", "level1/23_Softmax", "--solution", SOFTMAX, "--device", "cpu", "--json"], capsys
    )
    assert code == 0 and out.lstrip().startswith("{")  # stdout stays the one JSON object
    lines = err.splitlines()
    assert lines[0].startswith("kbv3 eval: evaluating level1/23_Softmax on cpu")
    assert sum("level1/23_Softmax still running" in line for line in lines) >= 2


def test_eval_batch_progress_names_each_evaluation_as_it_starts():
    out = io.StringIO()
    progress = Progress(2, stream=out, every_s=0, tty=False)
    progress.starting("level1/23_Softmax (m)")
    assert "eval-batch: started level1/23_Softmax (m) (1/2)" in out.getvalue()
    assert "running: level1/23_Softmax (m)" in progress.status_line()
    progress.record({"status": "correct"}, "w0", "level1/23_Softmax (m)")
    assert "running" not in progress.status_line()
    progress.finish()


def test_the_work_queue_tells_progress_what_it_hands_out():
    from kernelbench_v3.batch.queue import BatchItem, WorkQueue

    taken: list[str] = []
    item = BatchItem(problem_id="level1/23_Softmax", gpu="H100", model="m", solution_path="s.py", solution_sha256="0")
    queue = WorkQueue([item], on_take=lambda it: taken.append(it.problem_id))
    assert queue.take() is item and taken == ["level1/23_Softmax"]


def test_an_evaluation_lost_to_a_neighbours_fault_is_started_again_and_counted_once():
    # On an H100 (seventeenth lease) the rerun printed "started level1/40_LayerNorm (4/3)" and
    # named the item twice among those running.
    from kernelbench_v3.batch.queue import BatchItem, WorkQueue

    out = io.StringIO()
    progress = Progress(3, stream=out, every_s=0, tty=False)
    labels = {"level1/23_Softmax": "a", "level1/26_GELU_": "b", "level1/40_LayerNorm": "c"}
    items = [BatchItem(problem_id=p, gpu="H100", model="m", solution_path="s.py", solution_sha256="0") for p in labels]
    queue = WorkQueue(
        items,
        on_take=lambda it: progress.starting(labels[it.problem_id]),
        on_put_back=lambda it: progress.put_back(labels[it.problem_id]),
    )
    *_, third = queue.take(), queue.take(), queue.take()
    progress.record({"status": "correct"}, "w0", "a")
    progress.record({"status": "failed"}, "w1", "b")
    queue.put_back(third)
    assert progress.running == []
    assert queue.take() is third
    assert out.getvalue().splitlines()[-1] == "eval-batch: started c again (3/3)"
    assert progress.status_line().count("running: c") == 1
    progress.finish()


# ---------------------------------------------------------------- point 6: one source of defaults


def test_timing_seconds_help_states_the_evaluators_own_defaults(capsys):
    from kernelbench_v3.evaluate.request import DEFAULT_TIMING_SECONDS

    code, out, _ = run(["eval", "--help"], capsys)
    text = " ".join(out.split())
    part = text[text.rindex("--timing-seconds TIMING_SECONDS") :].split("--no-baseline")[0]
    # The numbers come from the one place the evaluator reads them from.
    for device, seconds in DEFAULT_TIMING_SECONDS.items():
        assert f"{seconds:g} on {device.upper()}" in part, part


# ---------------------------------------------------------------- points 7, 8, 11: eval-batch


def _sols(tmp_path: Path) -> Path:
    folder = tmp_path / "sols" / "level1"
    folder.mkdir(parents=True)
    (folder / "23_Softmax.py").write_text(SOFTMAX.read_text())
    return folder.parent


def test_eval_batch_refuses_an_out_that_is_not_parquet(tmp_path, capsys):
    out = tmp_path / "r.csv"
    code, stdout, err = run(["eval-batch", _sols(tmp_path), "--split", "h100", "--out", out, "--device", "cpu"], capsys)
    assert code == 2 and stdout == "" and "argument --out" in err and ".parquet" in err
    assert not list(tmp_path.glob("r.csv*"))


@pytest.mark.parametrize("statuses, code", [(["correct", "correct"], 0), (["failed", "incorrect"], 1)])
def test_eval_batch_exits_1_when_a_solution_failed(tmp_path, capsys, monkeypatch, statuses, code):
    records = [{"problem_id": "level1/23_Softmax", "status": s, "model": "m"} for s in statuses]
    result = BatchResult(
        out=tmp_path / "o.parquet", journal=tmp_path / "j", records=records, ran=2, already_done=0, skipped=[], wall_s=1
    )
    monkeypatch.setattr("kernelbench_v3.batch.run.run_batch", lambda *a, **k: result)
    got, _, _ = run(
        ["eval-batch", _sols(tmp_path), "--split", "h100", "--out", tmp_path / "o.parquet", "--device", "cpu"], capsys
    )
    assert got == code


def test_eval_batch_sizes_points_to_shapes(tmp_path, capsys):
    code, _, err = run(
        ["eval-batch", _sols(tmp_path), "--split", "h100", "--out", tmp_path / "o.parquet", "--sizes", "default"],
        capsys,
    )
    assert code == 2 and "--shapes default|reduced" in err and "kbv3 eval --sizes" in err


@pytest.mark.parametrize("shapes, expect", [("default", "sizes"), ("reduced", "reduced")])
def test_eval_batch_shapes_default_is_honoured_on_the_cpu(monkeypatch, shapes, expect):
    from kernelbench_v3.batch.items import evaluate_item
    from kernelbench_v3.batch.queue import BatchItem, BatchSettings
    from kernelbench_v3.catalog.problem import get_problem
    from kernelbench_v3.evaluate.record import Record

    seen = []

    def fake(request, **kwargs):
        seen.append(request)
        return Record(problem_id=request.problem_id)

    monkeypatch.setattr("kernelbench_v3.evaluate.evaluate", fake)
    item = BatchItem(
        problem_id="level1/23_Softmax", gpu="H100", model="m", solution_path=str(SOFTMAX), solution_sha256="0"
    )
    evaluate_item(item, BatchSettings(split="h100", device="cpu", sizes=shapes))
    problem = get_problem("level1/23_Softmax")
    assert dict(seen[0].sizes) == getattr(problem, expect) and seen[0].sizes  # never empty: the evaluator would reduce


# ---------------------------------------------------------------- point 13: the smaller ones


def test_a_folder_given_as_solution_is_named_a_folder(tmp_path, capsys):
    code, _, err = run(["eval", "--problem", "level1/23_Softmax", "--solution", tmp_path], capsys)
    assert code == 2 and "is a folder, not a file" in err and "does not exist" not in err


def test_split_takes_the_spellings_gpu_takes(capsys):
    code, out, _ = run(["ls", "--split", "H100"], capsys)
    assert code == 0 and "level1/23_Softmax" in out


def test_ls_has_a_header_and_sorts_numbers_as_numbers(capsys):
    code, out, _ = run(["ls", "--split", "h100"], capsys)
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["problem", "level"]
    ids = [line.split()[0] for line in lines[1:]]
    level1 = [int(i.split("/")[1].split("_")[0]) for i in ids if i.startswith("level1/")]
    assert level1 == sorted(level1) and level1.index(9) < level1.index(23)  # as text, 23 < 9


def test_an_unwritable_prompts_file_names_the_file_not_a_temporary():
    from kernelbench_v3.prompts.jsonl import write_jsonl

    with pytest.raises(OSError) as info:  # `kbv3 prompts` prints exc.filename: the file asked for
        write_jsonl([{"problem_id": "a"}], "/proc/x.jsonl")
    assert info.value.filename == "/proc/x.jsonl" and ".tmp" not in str(info.value)


def test_a_failed_parquet_write_leaves_no_temporary(tmp_path, monkeypatch):
    from kernelbench_v3.batch.run import write_parquet

    def refuse(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.replace", refuse)
    with pytest.raises(OSError) as info:
        write_parquet([{"problem_id": "a", "status": "correct"}], tmp_path / "o.parquet")
    assert info.value.filename == str(tmp_path / "o.parquet")
    assert list(tmp_path.iterdir()) == []
