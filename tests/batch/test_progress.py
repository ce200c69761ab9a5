"""Progress, throughput and problem grouping of `eval-batch` (batch/progress.py, batch/queue.py).

The progress and queue tests are pure bookkeeping with a fake clock. One test runs a tiny local
batch with a stand-in evaluator in two worker processes and checks the summary against the
records it wrote.
"""

from __future__ import annotations

import io

import pytest

from kernelbench_v3.batch.progress import Progress, Throughput
from kernelbench_v3.batch.queue import BatchItem, BatchSettings, WorkQueue
from kernelbench_v3.evaluate.options import EvalOptions
from tests.fakes import FakeClock
from tests.paths import PROBLEMS


def _record(status: str = "correct", duration_s: float = 10.0) -> dict:
    return {"status": status, "duration_s": duration_s}


def test_throughput_is_evaluations_over_wall_hours():
    by_worker = {"gpu0": [_record(duration_s=20.0)] * 6, "gpu1": [_record(duration_s=40.0)] * 3}
    t = Throughput.from_records(by_worker, wall_s=1800.0)
    assert t.evaluations == 9
    assert t.evals_per_hour == pytest.approx(18.0)  # 9 in half an hour
    assert t.workers["gpu0"].evals_per_hour == pytest.approx(12.0)
    assert t.workers["gpu1"].evals_per_hour == pytest.approx(6.0)
    assert t.workers["gpu0"].mean_eval_s == pytest.approx(20.0)
    assert "18.0 evals/h" in t.line() and "gpu0 12.0/h (6)" in t.line()
    assert t.to_dict()["workers"]["gpu1"]["evaluations"] == 3


def test_plain_lines_every_n_records_with_eta_and_per_worker_rates():
    clock, out = FakeClock(1000.0), io.StringIO()
    progress = Progress(8, stream=out, every_n=2, every_s=0, tty=False, clock=clock)
    for i in range(4):
        clock.now += 900.0  # 15 minutes per evaluation
        progress.record(_record("correct" if i else "incorrect"), f"gpu{i % 2}")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2  # after the 2nd and 4th record
    assert lines[-1].startswith("eval-batch 4/8 (50%)")
    assert "elapsed 1:00:00" in lines[-1] and "ETA 1:00:00" in lines[-1]  # 4 left at 4 an hour
    assert "4.0 evals/h" in lines[-1] and "gpu0 2.0/h" in lines[-1] and "gpu1 2.0/h" in lines[-1]
    assert "correct 3" in lines[-1] and "failures 1" in lines[-1]
    summary = progress.finish()
    assert summary.evaluations == 4 and summary.evals_per_hour == pytest.approx(4.0)


def test_plain_lines_at_least_every_interval_without_records():
    out = io.StringIO()
    progress = Progress(3, stream=out, every_n=100, every_s=0.05, tty=False)
    import time

    deadline = time.monotonic() + 5.0
    while not out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.05)
    progress.finish()
    assert out.getvalue().startswith("eval-batch 0/3 (0%)") and "ETA ?" in out.getvalue()


def test_disabled_progress_prints_nothing_but_still_counts():
    out = io.StringIO()
    progress = Progress(2, enabled=False, stream=out, tty=False)
    progress.record(_record(), "cpu0")
    assert progress.finish().evaluations == 1 and out.getvalue() == ""


def test_tty_progress_is_a_bar_with_worker_rates():
    out = io.StringIO()
    progress = Progress(2, stream=out, tty=True)
    progress.record(_record(), "gpu0")
    progress.finish()
    assert "eval-batch" in out.getvalue() and "gpu0=" in out.getvalue()


def _item(problem: str, model: str) -> BatchItem:
    return BatchItem(model, "H100", problem, f"/s/{model}/{problem}.py", f"{model}{problem}")


def test_each_worker_keeps_to_its_problem():
    problems = ["level1/23_Softmax", "level1/26_GELU_", "level1/40_LayerNorm"]
    items = [_item(p, f"m{i}") for p in problems for i in range(4)]
    queue = WorkQueue(items, warm=[(p, "H100") for p in problems])
    last: dict[str, tuple[str, str] | None] = {"w0": None, "w1": None, "w2": None}
    running: dict[str, BatchItem] = {}
    switches = {w: 0 for w in last}
    # Three workers, finishing round robin: each stays on one problem.
    while not queue.finished():
        for worker in last:
            if worker in running:
                item = running.pop(worker)
                queue.finish(item, {})
            item = queue.take(last[worker])
            if item is None:
                continue
            if last[worker] is not None and WorkQueue.group(item) != last[worker]:
                switches[worker] += 1
            last[worker] = WorkQueue.group(item)
            running[worker] = item
    assert switches == {"w0": 0, "w1": 0, "w2": 0}
    assert len({g for g in last.values()}) == 3


def test_a_worker_without_its_problem_takes_a_fresh_one_before_helping():
    a1, a2, b1 = _item("level1/23_Softmax", "m1"), _item("level1/23_Softmax", "m2"), _item("level1/26_GELU_", "m1")
    warm = [("level1/23_Softmax", "H100"), ("level1/26_GELU_", "H100")]
    queue = WorkQueue([a1, a2, b1], warm=warm)
    assert queue.take() == a1
    assert queue.take() == b1  # Softmax is being run: a fresh problem first
    assert queue.take() == a2  # then help with Softmax


def settled_evaluate(item: BatchItem, settings: BatchSettings) -> dict:
    """A stand-in evaluator: a correct record that took a second."""
    from kernelbench_v3.batch.items import failure_record

    record = failure_record(item, settings, "")
    record.update(status="correct", correct=True, error=None, duration_s=1.0)
    return record


@pytest.mark.slow  # two spawned worker processes
def test_a_tiny_batch_reports_progress_and_throughput_from_its_records(tmp_path, capsys):
    from kernelbench_v3.batch.run import describe_batch, run_batch

    folder = tmp_path / "sols"
    names = ("23_Softmax", "26_GELU_", "40_LayerNorm", "42_Max_Pooling_2D")
    for name in names:
        (folder / "level1").mkdir(parents=True, exist_ok=True)
        (folder / "level1" / f"{name}.py").write_text("class Model: pass\n")
    settings = BatchSettings(
        split="h100", device="cpu", problems_root=str(PROBLEMS), options=EvalOptions(timeout_s=60.0)
    )
    result = run_batch(folder, tmp_path / "out.parquet", settings, workers=2, evaluate_fn=settled_evaluate)
    err = capsys.readouterr().err
    assert "eval-batch 4/4 (100%)" in err and "evals/h" in err  # stderr is not a TTY: plain lines
    t = result.throughput
    assert t is not None and t.evaluations == len(result.records) == 4
    assert set(t.workers) <= {"cpu0", "cpu1"} and sum(w.evaluations for w in t.workers.values()) == 4
    assert t.evals_per_hour == pytest.approx(4 / (t.wall_s / 3600.0))
    assert all(w.mean_eval_s == pytest.approx(1.0) for w in t.workers.values())
    assert t.wall_s <= result.wall_s
    assert t.line() in describe_batch(result)
