"""A GPU shared by a batch's workers: the parent's turn table, a worker's lender, and the
executor that lends turns over the workers' pipes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from kernelbench_v3.batch import executors
from kernelbench_v3.batch.gpu_share import GRANTED, TURN, PipeLender, TurnTable
from kernelbench_v3.batch.queue import BatchItem, BatchSettings, WorkQueue
from kernelbench_v3.evaluate import GPU_LOCK, SOLUTION_LOCK


def _table():
    granted: list[str] = []
    return TurnTable(granted.append), granted


def test_an_exclusive_turn_waits_for_every_holder_and_shared_turns_hold_together():
    table, granted = _table()
    table.take("a", GPU_LOCK, shared=True)
    table.take("b", GPU_LOCK, shared=True)
    assert granted == ["a", "b"]  # two references beside each other
    table.take("c", GPU_LOCK, shared=False)
    assert granted == ["a", "b"] and table.waits("c")
    table.give("a", GPU_LOCK)
    assert granted == ["a", "b"]  # b still holds it shared
    table.give("b", GPU_LOCK)
    assert granted == ["a", "b", "c"] and not table.waits("c")


def test_a_shared_turn_queues_behind_a_waiting_exclusive_one_so_timing_is_never_starved():
    table, granted = _table()
    table.take("a", GPU_LOCK, shared=True)
    table.take("b", GPU_LOCK, shared=False)  # b's timing waits for a's reference
    table.take("c", GPU_LOCK, shared=True)  # compatible with a, but asked after b
    assert granted == ["a"]
    table.give("a", GPU_LOCK)
    assert granted == ["a", "b"]
    table.give("b", GPU_LOCK)
    assert granted == ["a", "b", "c"]


def test_the_locks_are_independent_a_reference_runs_beside_the_other_solution():
    table, granted = _table()
    table.take("a", SOLUTION_LOCK, shared=False)  # a's solution process runs its cases
    table.take("b", GPU_LOCK, shared=True)  # b's reference beside it
    assert granted == ["a", "b"]
    table.take("b", SOLUTION_LOCK, shared=False)
    assert granted == ["a", "b"] and table.waits("b")  # one solution process per GPU
    table.give("b", GPU_LOCK)
    table.take("a", GPU_LOCK, shared=False)  # a's timing: b's reference is over
    assert granted == ["a", "b", "a"]


def test_a_gone_worker_frees_what_it_held_and_drops_what_it_asked_for():
    table, granted = _table()
    table.take("a", SOLUTION_LOCK, shared=False)
    table.take("a", GPU_LOCK, shared=False)
    table.take("b", SOLUTION_LOCK, shared=False)
    table.take("c", GPU_LOCK, shared=True)
    assert granted == ["a", "a"]
    table.forget("a")
    assert granted == ["a", "a", "b", "c"]
    table.take("d", GPU_LOCK, shared=False)
    table.forget("d")
    assert not table.waits("d")


def test_asking_again_for_a_held_lock_is_refused_rather_than_a_deadlock():
    table, _ = _table()
    table.take("a", GPU_LOCK, shared=True)
    with pytest.raises(ValueError, match="asked again"):
        table.take("a", GPU_LOCK, shared=False)
    with pytest.raises(ValueError, match="unknown turn message"):
        table.handle("a", (TURN, "steal", GPU_LOCK))


class _Conn:
    def __init__(self, answers):
        self.sent, self.answers = [], list(answers)

    def send(self, message):
        self.sent.append(message)

    def recv(self):
        return self.answers.pop(0)


def test_a_worker_asks_its_parent_and_blocks_until_granted():
    conn = _Conn([GRANTED, "worker gpu0a asked again"])
    lender = PipeLender(conn)
    lender.take(GPU_LOCK, shared=True)
    lender.give(GPU_LOCK)
    assert conn.sent == [(TURN, "take", GPU_LOCK, True), (TURN, "give", GPU_LOCK)]
    with pytest.raises(RuntimeError, match="refused the GPU's solution turn"):
        lender.take(SOLUTION_LOCK, shared=False)


def test_workers_per_gpu_name_their_slots_and_share_the_gpu(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(executors.os, "cpu_count", lambda: 16)
    assert executors.local_slots("cuda", [0, 1], 1) == {
        "gpu0": {"CUDA_VISIBLE_DEVICES": "0", "OMP_NUM_THREADS": "6"},
        "gpu1": {"CUDA_VISIBLE_DEVICES": "1", "OMP_NUM_THREADS": "6"},
    }
    slots = executors.local_slots("cuda", [3], None)
    assert slots == {
        "gpu3a": {"CUDA_VISIBLE_DEVICES": "3", "OMP_NUM_THREADS": "7"},
        "gpu3b": {"CUDA_VISIBLE_DEVICES": "3", "OMP_NUM_THREADS": "7"},
    }
    executor = executors.LocalExecutor(BatchSettings(split="h100", device="cuda"), slots)
    first, second = executor._workers()
    assert first.table is second.table is not None
    alone = executors.LocalExecutor(BatchSettings(split="h100", device="cuda"), {"gpu0": {"CUDA_VISIBLE_DEVICES": "0"}})
    assert alone._workers()[0].table is None
    with pytest.raises(ValueError, match="workers per GPU"):
        executors.local_slots("cuda", [0], 27)


def test_cuda_workers_leave_a_core_per_gpu_for_its_timer_and_keep_a_users_thread_count(monkeypatch):
    # A timed call is timed by the host's clock: a neighbour's host work on every core delays it.
    assert executors.cuda_threads(16, 1, 2) == 7  # the H100 host: 14 cores for 2 workers
    assert executors.cuda_threads(128, 8, 2) == 7
    assert executors.cuda_threads(2, 1, 2) == 1  # never none
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert executors.local_slots("cuda", [0], 1) == {"gpu0": {"CUDA_VISIBLE_DEVICES": "0", "OMP_NUM_THREADS": "3"}}


# ----------------------------------------------------------------------------- the executor


def _interval(log: Path, what: str, seconds: float) -> None:
    start = time.monotonic()
    time.sleep(seconds)
    with open(log, "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "what": what, "start": start, "end": time.monotonic()}) + "\n")


def turn_taking_evaluate(item: BatchItem, settings: BatchSettings, turns=None) -> dict:
    """An evaluation's shape, with the turns the evaluator takes: reference, cases, timing."""
    log = Path(item.solution_path).parent / "intervals.jsonl"
    with turns.trusted(alone=False):
        _interval(log, "reference", 0.15)
    with turns.solution():
        _interval(log, "cases", 0.15)
        with turns.timing():
            _interval(log, "timing", 0.15)
        _interval(log, "finish", 0.02)
    return {"status": "correct", "solution_path": item.solution_path}


def _items(folder: Path, n: int) -> list[BatchItem]:
    return [BatchItem("m", "H100", f"level1/{i}_P", str(folder / f"s{i}.py"), f"sha{i}") for i in range(n)]


def _overlap(a: dict, b: dict) -> bool:
    return a["start"] < b["end"] and b["start"] < a["end"]


@pytest.mark.slow
def test_workers_on_one_gpu_never_overlap_a_solution_or_a_timed_second(tmp_path):
    settings = BatchSettings(split="h100", device="cpu")
    slots = {"gpu0a": {}, "gpu0b": {}}
    executor = executors.LocalExecutor(settings, slots, turn_taking_evaluate, gpu_of={"gpu0a": "0", "gpu0b": "0"})
    records = []
    executor.run(WorkQueue(_items(tmp_path, 6)), lambda item, record, worker: records.append((worker, record)))
    assert len(records) == 6 and {w for w, _ in records} == {"gpu0a", "gpu0b"}
    rows = [json.loads(line) for line in (tmp_path / "intervals.jsonl").read_text().splitlines()]
    assert len({r["pid"] for r in rows}) == 2
    for timed in (r for r in rows if r["what"] == "timing"):
        assert not any(_overlap(timed, other) for other in rows if other["pid"] != timed["pid"]), timed
    solution_steps = [r for r in rows if r["what"] in ("cases", "timing", "finish")]
    for a in solution_steps:
        assert not any(_overlap(a, b) for b in solution_steps if b["pid"] != a["pid"])


_FAULT_MARK = "faulted-once"


def context_losing_evaluate(item: BatchItem, settings: BatchSettings, turns=None) -> dict:
    """The first evaluation of item 0 ends in a lost CUDA context (as a neighbour's fault under
    MPS leaves it), with an error record; every other evaluation is correct."""
    from kernelbench_v3 import workers

    mark = Path(item.solution_path).parent / _FAULT_MARK
    if item.problem_id.endswith("0_P") and not mark.exists():
        mark.write_text("x")
        workers.cuda_context_lost = lambda: True  # this worker retires after the record
        return {"status": "error", "error": "CUDA error: an illegal memory access was encountered"}
    return {"status": "correct", "pid": os.getpid()}


@pytest.mark.slow
@pytest.mark.parametrize("shared", [True, False])
def test_an_error_from_a_context_lost_on_a_shared_gpu_runs_again_on_a_fresh_worker(tmp_path, shared):
    settings = BatchSettings(split="h100", device="cpu")
    slots = {"gpu0a": {}, "gpu0b": {}}
    gpu_of = {"gpu0a": "0", "gpu0b": "0"} if shared else {"gpu0a": "0", "gpu0b": "1"}
    executor = executors.LocalExecutor(settings, slots, context_losing_evaluate, gpu_of=gpu_of)
    records = {}
    executor.run(WorkQueue(_items(tmp_path, 3)), lambda item, record, worker: records.update({item.problem_id: record}))
    assert (tmp_path / _FAULT_MARK).exists()
    first = records["level1/0_P"]
    if shared:  # the lost evaluation ran again: its record is the second run's
        assert first["status"] == "correct"
    else:  # a GPU of its own: the error is its own, journaled as it came
        assert first["status"] == "error"
    assert records["level1/1_P"]["status"] == records["level1/2_P"]["status"] == "correct"


def memory_short_evaluate(item: BatchItem, settings: BatchSettings, turns=None) -> dict:
    """Item 0's first evaluation runs out of GPU memory (as beside a neighbour's large reference
    it did on an H100); every evaluation notes when it ran, so the test sees who ran beside whom."""
    start = time.time()
    time.sleep(0.3)
    mark = Path(item.solution_path).parent / "short-once"
    short = item.problem_id == "level1/0_P" and not mark.exists()
    mark.write_text("x") if short else None
    with open(Path(item.solution_path).parent / "runs.jsonl", "a") as out:
        out.write(json.dumps({"item": item.problem_id, "start": start, "end": time.time(), "short": short}) + "\n")
    if short:
        return {
            "status": "incorrect",
            "error": "case seed456: OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB",
        }
    return {"status": "correct"}


@pytest.mark.slow
@pytest.mark.parametrize("shared", [True, False])
def test_a_failure_for_gpu_memory_beside_a_neighbour_runs_again_with_the_gpu_alone(tmp_path, shared):
    settings = BatchSettings(split="h100", device="cpu")
    gpu_of = {"gpu0a": "0", "gpu0b": "0"} if shared else {"gpu0a": "0", "gpu0b": "1"}
    executor = executors.LocalExecutor(settings, {"gpu0a": {}, "gpu0b": {}}, memory_short_evaluate, gpu_of=gpu_of)
    records: dict[str, list] = {}
    journal = lambda item, record, worker: records.setdefault(item.problem_id, []).append(record)  # noqa: E731
    executor.run(WorkQueue(_items(tmp_path, 6)), journal)
    assert all(len(r) == 1 for r in records.values()) and len(records) == 6  # one record an item
    runs = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    if not shared:  # a GPU of its own: the failure is its own, journaled as it came
        assert records["level1/0_P"][0]["status"] == "incorrect" and len(runs) == 6
        return
    assert records["level1/0_P"][0]["status"] == "correct"  # the second run's record
    again = [r for r in runs if r["item"] == "level1/0_P" and not r["short"]]
    assert len(runs) == 7 and len(again) == 1
    assert not any(_overlap(again[0], other) for other in runs if other is not again[0])  # alone


@pytest.mark.slow
def test_real_evaluations_on_a_shared_device_take_their_turns_and_agree_with_one_alone(tmp_path):
    """The evaluator itself under lent turns (two workers, one "GPU" on the CPU): every lock is
    given back (nothing hangs) and the verdicts are those of the same solutions evaluated alone."""
    from tests.paths import EXAMPLES

    names = ["level1/23_Softmax", "level1/26_GELU_", "level1/23_Softmax"]
    items = [
        BatchItem("m", "H100", name, str(EXAMPLES / f"{name}.py"), f"sha{i}", sample=i) for i, name in enumerate(names)
    ]
    settings = BatchSettings(split="h100", device="cpu", sizes="reduced")
    results: dict[str, list] = {}
    for label, gpu_of in (("shared", {"gpu0a": "0", "gpu0b": "0"}), ("alone", {})):
        executor = executors.LocalExecutor(settings, {"gpu0a": {}, "gpu0b": {}}, gpu_of=gpu_of)
        records: list = results.setdefault(label, [])
        executor.run(WorkQueue(items), lambda item, record, worker, into=records: into.append((item.sample, record)))
        records.sort(key=lambda pair: pair[0])
    for (_, shared), (_, alone) in zip(results["shared"], results["alone"], strict=True):
        assert shared["status"] == alone["status"] == "correct", (shared.get("error"), alone.get("error"))
    turned = [record for _, record in results["shared"]]
    assert all("solution_gpu_wait" in r["phase_s"] and "gpu_wait" in r["phase_s"] for r in turned)
    assert not any("gpu_wait" in r["phase_s"] for _, r in results["alone"])


def leaking_evaluate(item: BatchItem, settings: BatchSettings, turns=None) -> dict:
    """Takes the solution lock and never gives it back (a bug an evaluation must not pass on)."""
    turns.lender.take(SOLUTION_LOCK, shared=False)
    return {"status": "correct"}


@pytest.mark.slow
def test_a_turn_an_ended_evaluation_kept_is_taken_back_so_the_other_worker_never_hangs(tmp_path):
    records = _run_shared(leaking_evaluate, _items(tmp_path, 4))
    assert len(records) == 4


def dying_evaluate(item: BatchItem, settings: BatchSettings, turns=None) -> dict:
    """Item 0's worker dies holding both locks; every other evaluation takes its turns."""
    if item.problem_id.endswith("0_P"):
        turns.lender.take(SOLUTION_LOCK, shared=False)
        turns.lender.take(GPU_LOCK, shared=False)
        os._exit(3)
    with turns.solution(), turns.timing():
        pass
    return {"status": "correct"}


@pytest.mark.slow
def test_a_worker_that_dies_holding_turns_frees_them_and_the_batch_goes_on(tmp_path):
    records = _run_shared(dying_evaluate, _items(tmp_path, 3))
    assert records["level1/0_P"]["status"] == "error" and "died (exit code 3)" in records["level1/0_P"]["error"]
    assert records["level1/1_P"]["status"] == records["level1/2_P"]["status"] == "correct"


def _run_shared(evaluate_fn, items: list[BatchItem], within_s: float = 120.0) -> dict[str, dict]:
    """Run `items` on two workers sharing one "GPU"; a batch still running after `within_s` is a
    hang (a turn never given back), and fails the test instead of holding the suite."""
    import threading

    settings = BatchSettings(split="h100", device="cpu")
    executor = executors.LocalExecutor(
        settings, {"gpu0a": {}, "gpu0b": {}}, evaluate_fn, gpu_of={"gpu0a": "0", "gpu0b": "0"}
    )
    records: dict[str, dict] = {}
    runner = threading.Thread(
        target=executor.run,
        args=(WorkQueue(items), lambda item, record, worker: records.update({item.problem_id: record})),
        daemon=True,
    )
    runner.start()
    runner.join(within_s)
    assert not runner.is_alive(), f"the batch hung with {len(records)} of {len(items)} records"
    return records


def test_the_rtx3090_split_keeps_one_worker_per_gpu_unless_told(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    small = executors.make_executor("local", BatchSettings(split="rtx3090", device="cuda"))
    assert list(small.slots) == ["gpu0"] and small._workers()[0].table is None
    assert list(executors.make_executor("local", BatchSettings(split="h100", device="cuda")).slots) == [
        "gpu0a",
        "gpu0b",
    ]
    told = executors.make_executor("local", BatchSettings(split="rtx3090", device="cuda"), workers=2)
    assert list(told.slots) == ["gpu0a", "gpu0b"]
