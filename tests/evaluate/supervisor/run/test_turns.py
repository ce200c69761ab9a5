"""The turns of a shared GPU (`supervisor.run.turns`): which lock each step takes, in which
order, and that an evaluation holds them where the threat model needs them: no solution process
outside the solution lock, no timed second outside the exclusive GPU lock."""

from __future__ import annotations

import pytest

from kernelbench_v3.evaluate import GPU_LOCK, SOLUTION_LOCK, EvalRequest, GpuTurns, evaluate
from kernelbench_v3.evaluate.solution.zygote import Zygote
from kernelbench_v3.evaluate.supervisor.run import evaluation, turns
from tests.paths import EXAMPLES


class RecordingLender:
    """Grants every turn at once and writes down what was taken and given, with other events."""

    def __init__(self):
        self.events: list[str] = []
        self.held: dict[str, bool] = {}

    def take(self, lock: str, shared: bool) -> None:
        assert lock not in self.held, f"{lock} taken twice: a real lender would wait forever"
        if lock == GPU_LOCK and not shared:
            assert SOLUTION_LOCK in self.held, "the exclusive GPU lock outside the solution lock"
        self.held[lock] = shared
        self.events.append(f"take {lock} {'shared' if shared else 'exclusive'}")

    def give(self, lock: str) -> None:
        del self.held[lock]
        self.events.append(f"give {lock}")


@pytest.fixture
def synced(monkeypatch) -> list[str]:
    calls: list[str] = []
    monkeypatch.setattr(turns, "_synchronize", lambda: calls.append("sync"))
    return calls


def test_each_turn_takes_its_locks_in_order_and_the_device_finishes_before_a_gpu_lock_goes(synced):
    lender = RecordingLender()
    shared = GpuTurns(lender)
    with shared.trusted(alone=False):
        pass
    with shared.trusted(alone=True):
        pass
    with shared.solution(), shared.timing():
        lender.events.append("timed")
    assert lender.events == [
        "take gpu shared",
        "give gpu",
        "take solution exclusive",
        "take gpu exclusive",
        "give gpu",
        "give solution",
        "take solution exclusive",
        "take gpu exclusive",
        "timed",
        "give gpu",
        "give solution",
    ]
    assert synced == ["sync"] * 3  # once per GPU turn, before it is given back


def test_a_turn_is_given_back_when_its_work_raises(synced):
    lender = RecordingLender()
    with pytest.raises(RuntimeError), GpuTurns(lender).trusted(alone=True):
        raise RuntimeError("the reference failed")
    assert lender.held == {} and synced == ["sync"]


def test_alone_takes_nothing_and_waits_for_nothing(synced):
    assert not turns.ALONE.shared
    with turns.ALONE.trusted(alone=True), turns.ALONE.solution(), turns.ALONE.timing():
        pass
    assert synced == []


@pytest.fixture
def reaps(monkeypatch, request) -> list[str]:
    """Every zygote reap (the solution's processes killed) goes into the lender's events."""
    events: list[str] = request.getfixturevalue("lender").events
    original = Zygote.reap

    def reap(self):
        events.append("reap")
        return original(self)

    monkeypatch.setattr(Zygote, "reap", reap)
    return events


@pytest.fixture
def lender() -> RecordingLender:
    return RecordingLender()


def _softmax(**options) -> EvalRequest:
    options = {
        "device": "cpu",
        "timeout_s": 120.0,
        "seeds": (42,),
        "other_shape": False,
        "sizes": {"batch_size": 4, "dim": 96},
        "timing_seconds": 0.2,
        **options,
    }
    return EvalRequest("level1/23_Softmax", EXAMPLES / "level1/23_Softmax.py", **options)


@pytest.mark.slow
def test_an_evaluation_holds_the_solution_lock_from_before_the_fork_to_after_the_reap(tmp_path, lender, reaps):
    record = evaluate(_softmax(baseline=False), cache_dir=tmp_path, gpu_turns=GpuTurns(lender))
    assert record.correct and record.sol_ms, (record.failed_check, record.error)
    assert lender.events == [
        "take gpu shared",  # the reference, beside the other evaluation's solution
        "give gpu",
        "take solution exclusive",
        "take gpu exclusive",  # timing
        "give gpu",
        "reap",
        "give solution",
    ]
    assert {"gpu_wait", "reference_gpu_wait", "solution_gpu_wait"} <= set(record.phase_s)
    assert record.phase_s["bookkeeping"] >= 0


@pytest.mark.slow
def test_a_cold_baseline_has_the_gpu_alone_from_its_launch_to_its_result(tmp_path, lender, reaps):
    record = evaluate(_softmax(baseline=True), cache_dir=tmp_path, gpu_turns=GpuTurns(lender))
    assert record.correct and record.baseline_ms and record.baseline_cached is False, record.error
    assert lender.events[:4] == [
        "take solution exclusive",  # no solution process while the child compiles and times
        "take gpu exclusive",
        "give gpu",
        "give solution",
    ]
    again = RecordingLender()
    record = evaluate(_softmax(baseline=True), cache_dir=tmp_path, gpu_turns=GpuTurns(again))
    assert record.baseline_cached is True
    assert again.events[:2] == ["take gpu shared", "give gpu"]  # cached: the reference shares


@pytest.mark.slow
def test_a_reference_that_fails_beside_another_solution_runs_again_alone(tmp_path, lender, monkeypatch):
    real = evaluation.compute
    calls = []

    def fails_once(*args, **kwargs):
        calls.append(dict(lender.held))
        if len(calls) == 1:
            raise RuntimeError("CUDA out of memory (the other solution held it)")
        return real(*args, **kwargs)

    monkeypatch.setattr(evaluation, "compute", fails_once)
    record = evaluate(_softmax(baseline=False), cache_dir=tmp_path, gpu_turns=GpuTurns(lender))
    assert record.correct, (record.failed_check, record.error)
    assert calls == [{GPU_LOCK: True}, {SOLUTION_LOCK: False, GPU_LOCK: False}]


@pytest.mark.slow
def test_alone_a_failed_reference_is_the_records_error_at_once(tmp_path, monkeypatch):
    def fails(*args, **kwargs):
        raise RuntimeError("no memory")

    monkeypatch.setattr(evaluation, "compute", fails)
    record = evaluate(_softmax(baseline=False), cache_dir=tmp_path)
    assert record.status == "error" and "no memory" in record.error
    assert "gpu_wait" not in record.phase_s and "reference_gpu_wait" not in record.phase_s


@pytest.mark.slow
def test_the_reference_model_is_built_before_the_gpu_is_taken(tmp_path, lender, monkeypatch):
    """Building the model is host work (level4/5: about 30 s on the CPU): done while holding the
    GPU it kept the other evaluation from timing. The retry alone builds anew."""
    real_build, real_compute = evaluation.build_on_host, evaluation.compute
    held_at_build, given = [], []

    def build(*args, **kwargs):
        held_at_build.append(dict(lender.held))
        return real_build(*args, **kwargs)

    def fails_once(*args, **kwargs):
        given.append(args[7] if len(args) > 7 else kwargs.get("built"))
        if len(given) == 1:
            raise RuntimeError("CUDA out of memory (the other solution held it)")
        return real_compute(*args, **kwargs)

    monkeypatch.setattr(evaluation, "build_on_host", build)
    monkeypatch.setattr(evaluation, "compute", fails_once)
    record = evaluate(_softmax(baseline=False), cache_dir=tmp_path, gpu_turns=GpuTurns(lender))
    assert record.correct, (record.failed_check, record.error)
    assert held_at_build == [{}]  # nothing held while it built
    assert given[0] is not None and given[1] is None
    assert record.phase_s["reference_build"] >= 0
