"""A baseline child started ahead of the reference phase (`reference.ahead.BaselineAhead`): it
times only once the evaluation releases the lock, a cached baseline starts none, an evaluation
that ends early leaves no child and no held lock, a finished child's result is kept. The child is
a stand-in for `isolate.run_child` that plays the real child's part with the lock."""

from __future__ import annotations

import threading
import time

import pytest

from kernelbench_v3.catalog.problem import get_problem
from kernelbench_v3.evaluate.supervisor.reference import baseline, baseline_child, isolate
from kernelbench_v3.evaluate.supervisor.reference.ahead import LOCK_NAME, BaselineAhead
from tests.evaluate.supervisor.reference.locks import lock_free

SPEC = {"device": "cpu", "problem_path": "p.py", "sizes": {"n": 4}, "seeds": [42]}


def _job(cache) -> baseline.BaselineJob:
    return baseline.baseline_job(SPEC, problem_sha256="sha", device_name="cpu:test", cache_dir=cache, timeout_s=30)


class StandInChild:
    """`run_child` in the ahead thread: notes the spec and whether the lock was free when it
    started, then, as `child_main` does, takes the timing lock to time, unless stopped first."""

    def __init__(self, *, wait_for_stop: bool = False):
        self.calls: list[dict] = []
        self.started = threading.Event()
        self.free_at_start: bool | None = None
        self.timed = False
        self.wait_for_stop = wait_for_stop

    def __call__(self, role, workdir, spec, *, timeout_s, env=None, stop=None, pause_limit=None):
        self.calls.append({"role": role, "spec": spec, "limit_paused": pause_limit.is_set()})
        self.free_at_start = lock_free(spec["timing_lock"])
        self.started.set()
        if self.wait_for_stop:  # still compiling when the evaluation gives up
            assert stop.wait(30), "never stopped"
            return isolate.ChildOutcome(None, -9, False, False, "compiling...", 1.0, 0.0, stopped=True)
        with baseline_child.timing_lock(spec["timing_lock"]):
            self.timed = True
        marks = {"start": 1.0, "import": 1.5, "build": 2.0, "compile": 3.0, "wait": 4.0, "eager": 5.0}
        result = {"ok": True, "eager": {"median_ms": 2.5}, "precision": "fp32", "marks": marks}
        return isolate.ChildOutcome(result, 0, False, False, "", 5.5, 0.5)


@pytest.fixture
def child(monkeypatch) -> StandInChild:
    stand_in = StandInChild()
    monkeypatch.setattr(isolate, "run_child", stand_in)
    return stand_in


def test_the_child_starts_at_once_but_times_only_after_the_release(tmp_path, child):
    ahead = BaselineAhead(_job(tmp_path / "cache"), tmp_path)
    assert child.started.wait(30) and child.free_at_start is False  # the evaluation held it
    assert child.calls[0]["limit_paused"] is True  # its wait for the lock is not its slowness
    assert child.calls[0]["spec"]["timing_lock"] == str(tmp_path / LOCK_NAME)  # in the work folder
    base = ahead.result()  # releases the lock, then waits for the child
    assert child.timed and not ahead.running and lock_free(tmp_path / LOCK_NAME)
    assert base["cached"] is False and base["baseline_ms"] == 2.5 and base["baseline_type"] == "eager"
    assert baseline.load_cached(tmp_path / "cache", base["key"])["baseline_ms"] == 2.5  # cached as before
    # The steps divide at the moment the evaluation began to wait: all before it here.
    assert set(base["steps_s"]) == set(baseline_child.CHILD_STEPS) - {"compiled"}
    assert sum(base["steps_beside_s"].values()) == pytest.approx(5.5) and sum(base["steps_s"].values()) == 0
    ahead.stop()  # after the result: nothing left to do, no error


def test_a_cached_baseline_starts_no_child_and_takes_no_lock(tmp_path, child):
    job = _job(tmp_path / "cache")
    entry = {"baseline_ms": 1.5, "baseline_type": "eager", "stored_at": time.time()}
    baseline.store_cached(job.cache, job.key, entry)
    ahead = BaselineAhead(job, tmp_path)
    assert not ahead.running and not child.calls and not (tmp_path / LOCK_NAME).exists()
    assert ahead.result() == {**entry, "cached": True}
    assert ahead.result() == baseline.obtain(job)  # the old path's answer
    ahead.release()
    ahead.stop()
    assert not child.calls


def test_stopping_early_kills_the_child_frees_the_lock_and_caches_nothing(tmp_path, monkeypatch):
    stand_in = StandInChild(wait_for_stop=True)
    monkeypatch.setattr(isolate, "run_child", stand_in)
    job = _job(tmp_path / "cache")
    ahead = BaselineAhead(job, tmp_path)
    assert stand_in.started.wait(30)
    ahead.stop()
    assert not ahead.running and lock_free(tmp_path / LOCK_NAME) and not stand_in.timed
    assert baseline.load_cached(job.cache, job.key) is None  # a stop is no failure of the reference's
    ahead.stop()  # twice: harmless


def test_a_child_that_finished_before_the_stop_is_kept(tmp_path, child):
    job = _job(tmp_path / "cache")
    ahead = BaselineAhead(job, tmp_path)
    ahead.release()
    while ahead.running:  # the child times and its outcome is settled in the thread
        threading.Event().wait(0.01)
    ahead.stop()
    assert child.timed and baseline.load_cached(job.cache, job.key)["baseline_ms"] == 2.5


def test_a_failed_child_is_cached_as_a_failure(tmp_path, monkeypatch):
    def crashed(role, workdir, spec, **kwargs):
        return isolate.ChildOutcome(None, 1, False, False, "Traceback ...", 1.0, 0.0)

    monkeypatch.setattr(isolate, "run_child", crashed)
    job = _job(tmp_path / "cache")
    base = BaselineAhead(job, tmp_path).result()
    assert base["failed"] and base["cached"] is False and "exited with code 1" in base["error"]
    assert baseline.load_cached(job.cache, job.key)["failed"] is True
    assert BaselineAhead(job, tmp_path / "again").result()["cached"] is True


class _NoZygote:
    """The evaluation's zygote, never used: the reference fails before the solution phase."""

    def __init__(self, *args, **kwargs):
        pass

    def reap(self) -> int:
        return 0

    def close(self) -> None:
        pass


def test_an_evaluation_whose_reference_fails_leaves_no_child_and_no_held_lock(tmp_path, monkeypatch, problems_dir):
    from kernelbench_v3.evaluate.request import EvalRequest
    from kernelbench_v3.evaluate.supervisor.run import evaluation

    stand_in = StandInChild(wait_for_stop=True)
    monkeypatch.setattr(isolate, "run_child", stand_in)
    monkeypatch.setattr(evaluation, "Zygote", _NoZygote)
    monkeypatch.setattr(evaluation.POOL, "get", lambda device: None)

    def failing_reference(*args, **kwargs):
        assert stand_in.started.wait(10), "the baseline child was not started before the reference"
        assert stand_in.free_at_start is False  # and the evaluation held the lock from its start
        raise RuntimeError("the reference blew up")

    monkeypatch.setattr(evaluation, "compute", failing_reference)
    solution = tmp_path / "solution.py"
    solution.write_text("x = 1\n")
    request = EvalRequest("level1/26_GELU_", solution, device="cpu", baseline=True, seeds=(42,))
    assert request.wants_baseline and request.time_solution
    record = evaluation.run_evaluation(request, problems_dir=problems_dir, cache_dir=tmp_path / "cache")
    assert record.status == "error" and "the reference blew up" in record.error
    lock = stand_in.calls[0]["spec"]["timing_lock"]
    assert not any(t.name == "kbv3-baseline" for t in threading.enumerate())  # the child's thread reaped
    assert not stand_in.timed and record.baseline_ms is None
    assert not (tmp_path / "cache" / "baselines").exists()  # nothing cached of a stopped child
    assert "kbv3-eval-" in lock  # the evaluation's work folder, not a global path


def test_an_evaluation_with_its_baseline_cached_starts_no_child(tmp_path, monkeypatch, problems_dir):
    from kernelbench_v3.evaluate.request import EvalRequest
    from kernelbench_v3.evaluate.supervisor.run import evaluation

    def no_child(*args, **kwargs):
        raise AssertionError("a cached baseline started a child")

    monkeypatch.setattr(isolate, "run_child", no_child)
    monkeypatch.setattr(evaluation, "Zygote", _NoZygote)
    monkeypatch.setattr(evaluation.POOL, "get", lambda device: None)
    seen: list[BaselineAhead] = []
    monkeypatch.setattr(
        evaluation, "BaselineAhead", lambda job, work, **kw: seen.append(BaselineAhead(job, work, **kw)) or seen[-1]
    )

    def failing_reference(*args, **kwargs):
        raise RuntimeError("stop here: the baseline is what is looked at")

    monkeypatch.setattr(evaluation, "compute", failing_reference)
    solution = tmp_path / "solution.py"
    solution.write_text("x = 1\n")
    request = EvalRequest("level1/26_GELU_", solution, device="cpu", baseline=True, seeds=(42,))
    problem = get_problem(request.problem_id, problems_dir)
    problem_sizes = dict(problem.reduced) if problem.reduced_sizes else {}  # a CPU evaluation's sizes
    job = baseline.request_job(request, problem, problem.source, problem_sizes, tmp_path / "cache", 1.0)
    baseline.store_cached(job.cache, job.key, {"baseline_ms": 1.5, "baseline_type": "eager", "stored_at": time.time()})
    evaluation.run_evaluation(request, problems_dir=problems_dir, cache_dir=tmp_path / "cache")
    assert len(seen) == 1 and seen[0].hit is not None and seen[0].hit["cached"] is True
