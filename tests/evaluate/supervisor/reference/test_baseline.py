"""Baseline timings of the reference: choice, cache key, the timing child, cached failures."""

from __future__ import annotations

import json

import pytest

from kernelbench_v3.catalog.problem import get_problem
from kernelbench_v3.evaluate.supervisor.reference import baseline, baseline_child
from tests.evaluate.supervisor.reference.locks import lock_free


def test_baseline_choice_and_cache(tmp_path):
    assert baseline.choose(2.0, 1.0) == (1.0, "compile")
    assert baseline.choose(1.0, 1.0) == (1.0, "eager")
    assert baseline.choose(1.0, None) == (1.0, "eager")
    key = baseline.cache_key("sha", {"n": 4}, "H200", "2.11")
    assert key != baseline.cache_key("sha", {"n": 4}, "H100", "2.11")
    assert key != baseline.cache_key("sha", {"n": 4}, "H200", "2.12")
    assert key != baseline.cache_key("sha2", {"n": 4}, "H200", "2.11")
    baseline.store_cached(tmp_path, key, {"baseline_ms": 1.5})
    assert baseline.load_cached(tmp_path, key) == {"baseline_ms": 1.5}
    assert baseline.load_cached(tmp_path, "missing") is None


@pytest.mark.slow
def test_baseline_child_times_eager_and_is_cached(tmp_path):
    problem = get_problem("level1/26_GELU_")
    spec = {
        "device": "cpu",
        "problem_path": str(problem.path),
        "sizes": {"batch_size": 4, "dim": 64},
        "seeds": [42, 123],
        "timing_seconds": 1.0,
        "compile": False,
    }
    first = baseline.get_baseline(
        spec, problem_sha256=problem.sha256, device_name="cpu:test", cache_dir=tmp_path, timeout_s=120
    )
    assert first["cached"] is False and first["baseline_type"] == "eager" and first["eager_ms"] > 0
    assert first["precision"] == "fp32" and first["compiled_ms"] is None
    second = baseline.get_baseline(
        spec, problem_sha256=problem.sha256, device_name="cpu:test", cache_dir=tmp_path, timeout_s=120
    )
    assert second["cached"] is True and second["eager_ms"] == first["eager_ms"]
    # Where the child's seconds went, for this timing only: never from the cache.
    assert list(first["steps_s"]) == ["start", "build", "wait", "eager", "exit"]  # compile off
    assert "steps_s" not in second


def test_baseline_failures_are_cached_with_their_reason_and_can_be_retried(tmp_path, monkeypatch):
    from kernelbench_v3.evaluate.supervisor.reference import isolate

    calls = []

    def failing_child(role, workdir, spec, **kwargs):
        calls.append(role)
        return isolate.ChildOutcome(None, None, True, False, "still compiling...", 30.0)

    monkeypatch.setattr(isolate, "run_child", failing_child)
    spec = {"device": "cpu", "problem_path": "p.py", "sizes": {"n": 4}, "seeds": [42]}
    args = {"problem_sha256": "sha", "device_name": "cpu:test", "cache_dir": tmp_path, "timeout_s": 30}
    first = baseline.get_baseline(spec, **args)
    assert first["failed"] and not first["cached"] and "timed out" in first["error"] and calls == ["baseline"]
    again = baseline.get_baseline(spec, **args)
    assert again["failed"] and again["cached"] and again["error"] == first["error"] and len(calls) == 1
    assert again["baseline_ms"] is None if "baseline_ms" in again else True
    # Same problem, other sizes: another key, timed afresh.
    baseline.get_baseline({**spec, "sizes": {"n": 8}}, **args)
    assert len(calls) == 2
    baseline.get_baseline(spec, **args, retry_failed=True)
    assert len(calls) == 3
    monkeypatch.setenv(baseline.RETRY_FAILED_ENV, "1")
    baseline.get_baseline(spec, **args)
    assert len(calls) == 4


def test_a_baseline_that_ran_out_of_device_memory_is_not_cached(tmp_path, monkeypatch):
    # What else held the memory decides it (an H100: level3/31's compiled reference met 53 GB that
    # another worker kept), so the next evaluation times it again rather than inheriting it.
    from kernelbench_v3.evaluate.supervisor.reference import isolate

    calls = []
    oom = "OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB"

    def child(role, workdir, spec, **kwargs):
        calls.append(role)
        return isolate.ChildOutcome({"ok": False, "error": oom}, 1, False, False, "", 3.0)

    monkeypatch.setattr(isolate, "run_child", child)
    spec = {"device": "cuda", "problem_path": "p.py", "sizes": {}, "seeds": [42]}
    args = {"problem_sha256": "sha", "device_name": "NVIDIA H100", "cache_dir": tmp_path, "timeout_s": 30}
    first = baseline.get_baseline(spec, **args)
    assert first["failed"] and "CUDA out of memory" in first["error"] and "not_cached_because" in first
    again = baseline.get_baseline(spec, **args)
    assert again["failed"] and not again["cached"] and len(calls) == 2
    job = baseline.baseline_job(spec, **args)  # one an older version cached is timed again too
    baseline.store_cached(job.cache, job.key, {"failed": True, "error": f"baseline failed: {oom}"})
    assert baseline.cached_baseline(job) is None
    baseline.store_cached(job.cache, job.key, {"failed": True, "error": "baseline failed: RuntimeError: boom"})
    assert baseline.cached_baseline(job)["cached"]


def test_a_baseline_timed_now_says_where_its_child_spent_its_seconds(tmp_path, monkeypatch):
    """The child marks when each step ended on the machine's monotonic clock (the parent's too):
    its start (interpreter and imports), the build, compiling, its wait for the timing lock, eager
    timing, compiled timing, and its exit up to the parent's reaping. A cached baseline has no
    such seconds."""
    from kernelbench_v3.evaluate.supervisor.reference import isolate

    marks = {"start": 103.5, "build": 104.0, "compile": 109.0, "wait": 111.0, "eager": 113.0, "compiled": 115.0}

    def child(role, workdir, spec, **kwargs):
        result = {"ok": True, "marks": marks, "eager": {"median_ms": 2.0}}
        result["compiled"] = {"median_ms": 1.0}
        return isolate.ChildOutcome(result, 0, False, False, "", 15.5, 100.0)

    monkeypatch.setattr(isolate, "run_child", child)
    spec = {"device": "cpu", "problem_path": "p.py", "sizes": {"n": 4}, "seeds": [42]}
    args = {"problem_sha256": "sha", "device_name": "cpu:test", "cache_dir": tmp_path, "timeout_s": 30}
    first = baseline.get_baseline(spec, **args)
    steps = {"start": 3.5, "build": 0.5, "compile": 5.0, "wait": 2.0, "eager": 2.0, "compiled": 2.0, "exit": 0.5}
    assert first["cached"] is False and first["steps_s"] == steps
    assert sum(steps.values()) == 15.5  # the child's whole wall, as its parent saw it
    stored = json.loads((tmp_path / "baselines" / f"{first['key']}.json").read_text())
    assert "steps_s" not in stored and "steps_s" not in baseline.get_baseline(spec, **args)


def test_a_childs_steps_divide_at_a_moment_into_what_came_before_and_after():
    """An evaluation that waited for its baseline child from 110.0 on waited for the steps' seconds
    after it; those before ran beside its reference phase. The two add up to each whole step."""
    from kernelbench_v3.evaluate.supervisor.reference import isolate

    marks = {"start": 103.5, "build": 104.0, "compile": 109.0, "wait": 111.0, "eager": 113.0, "compiled": 115.0}
    outcome = isolate.ChildOutcome({"ok": True, "marks": marks}, 0, False, False, "", 15.5, 100.0)
    before = baseline_child.child_steps(outcome, until=110.0)
    after = baseline_child.child_steps(outcome, since=110.0)
    assert before == {"start": 3.5, "build": 0.5, "compile": 5.0, "wait": 1.0, "eager": 0, "compiled": 0, "exit": 0}
    assert after == {"start": 0, "build": 0, "compile": 0, "wait": 1.0, "eager": 2.0, "compiled": 2.0, "exit": 0.5}
    whole = baseline_child.child_steps(outcome)
    assert {k: before[k] + after[k] for k in whole} == whole


class _Timings:
    """`child_main`'s compile and timing stand-ins: each notes what ran, in order, and whether the
    test (playing the evaluation's reference phase) still held the timing lock."""

    def __init__(self, lock_path, *, compile_fails=False):
        import threading

        self.lock_path, self.compile_fails = str(lock_path), compile_fails
        self.events: list[tuple[str, bool, bool]] = []  # (what, test holds the lock, lock free to others)
        self.test_holds = True
        self.compiled = threading.Event()

    def lock_free(self) -> bool:
        return lock_free(self.lock_path)

    def compile(self, model, template):
        self.events.append(("compile", self.test_holds, self.lock_free()))
        self.compiled.set()
        if self.compile_fails:
            raise RuntimeError("inductor gave up")
        return lambda *args: model(*args)

    def time(self, model, module, template, device, seconds, gate=True):
        self.events.append(("time eager" if gate else "time compiled", self.test_holds, self.lock_free()))
        return {"median_ms": 1.0 if gate else 0.5}


def _child_beside_a_held_lock(tmp_path, monkeypatch, timings):
    """`child_main` on GELU in a thread while the test holds its timing lock until the child's
    compile has happened; returns what the child returned."""
    import threading

    problem = get_problem("level1/26_GELU_")
    monkeypatch.setattr(baseline_child, "import_compiler", lambda: None)  # its own step: not this test's
    monkeypatch.setattr(baseline_child, "_compiled", timings.compile)
    monkeypatch.setattr(baseline_child, "time_reference", timings.time)
    spec = {
        "device": "cpu",
        "problem_path": str(problem.path),
        "sizes": {"batch_size": 2, "dim": 8},
        "seeds": [42],
        "timing_lock": timings.lock_path,
    }
    out: dict = {}
    child = threading.Thread(target=lambda: out.update(baseline_child.child_main(spec, tmp_path)))
    with baseline_child.timing_lock(timings.lock_path):  # the evaluation's reference phase
        child.start()
        try:
            # The old order timed eager before compiling: it would block here on the held lock.
            assert timings.compiled.wait(20), "the child did not compile while the lock was held"
        finally:
            timings.test_holds = False
    child.join(60)
    assert not child.is_alive()
    return out


def test_the_child_compiles_before_taking_the_lock_and_times_both_in_one_hold(tmp_path, monkeypatch):
    timings = _Timings(tmp_path / "timing.lock")
    result = _child_beside_a_held_lock(tmp_path, monkeypatch, timings)
    # Compiled while the test held the lock; both timings after its release, the child holding it.
    assert timings.events == [("compile", True, False), ("time eager", False, False), ("time compiled", False, False)]
    assert list(result["marks"]) == ["start", "import", "build", "compile", "wait", "eager", "compiled"]
    assert list(result["marks"]) == list(baseline_child.CHILD_STEPS[:-1])
    assert result["eager"] == {"median_ms": 1.0} and result["compiled"]["median_ms"] == 0.5
    assert "compile_error" not in result and timings.lock_free()


def test_a_compile_failure_still_times_eager_as_the_baseline(tmp_path, monkeypatch):
    timings = _Timings(tmp_path / "timing.lock", compile_fails=True)
    result = _child_beside_a_held_lock(tmp_path, monkeypatch, timings)
    assert timings.events == [("compile", True, False), ("time eager", False, False)]
    assert "inductor gave up" in result["compile_error"] and "compiled" not in result
    assert list(result["marks"]) == ["start", "import", "build", "compile", "wait", "eager"]
    entry = baseline.baseline_entry({"ok": True, **result})
    assert entry["baseline_type"] == "eager" and entry["baseline_ms"] == 1.0


def test_a_cpu_baseline_is_keyed_by_its_environment_and_expires(tmp_path, monkeypatch):
    from kernelbench_v3.evaluate.supervisor.reference import isolate

    calls = []

    def child(role, workdir, spec, **kwargs):
        calls.append(role)
        result = {"ok": True, "eager": {"median_ms": 1.0 + len(calls)}, "compiled": None, "precision": "fp32"}
        return isolate.ChildOutcome(result, None, False, False, "", 1.0)

    monkeypatch.setattr(isolate, "run_child", child)
    monkeypatch.setattr(baseline, "baseline_entry", lambda result: {"eager_ms": result["eager"]["median_ms"]})
    spec = {"device": "cpu", "problem_path": "p.py", "sizes": {"n": 4}, "seeds": [42]}
    args = {"problem_sha256": "sha", "device_name": "cpu:test", "cache_dir": tmp_path, "timeout_s": 30}
    first = baseline.get_baseline(spec, **args)
    assert baseline.get_baseline(spec, **args)["cached"] is True and len(calls) == 1
    # Another environment (another venv, host or triton) never reads this one's CPU figure.
    monkeypatch.setattr(baseline, "cpu_environment", lambda: "/other/venv|host|2|triton 9")
    assert baseline.get_baseline(spec, **args)["cached"] is False and len(calls) == 2
    monkeypatch.undo()
    monkeypatch.setattr(isolate, "run_child", child)
    monkeypatch.setattr(baseline, "baseline_entry", lambda result: {"eager_ms": result["eager"]["median_ms"]})
    # An old CPU figure is timed again rather than kept forever.
    path = tmp_path / "baselines" / f"{first['key']}.json"
    entry = json.loads(path.read_text())
    path.write_text(json.dumps({**entry, "stored_at": entry["stored_at"] - baseline.CPU_MAX_AGE_S - 1}))
    again = baseline.get_baseline(spec, **args)
    assert again["cached"] is False and len(calls) == 3


@pytest.mark.parametrize("timed_gate", ["spin", "hold"])
def test_a_gpu_baseline_timed_by_another_gate_than_its_key_names_is_not_cached(tmp_path, monkeypatch, timed_gate):
    """Under KBV3_GATE=hold the key says hold; a child whose HOLD was unavailable fell back to the
    spin, and its figure must not be served later as a hold figure."""
    from kernelbench_v3.evaluate import mps
    from kernelbench_v3.evaluate.supervisor.reference import isolate

    calls = []

    def child(role, workdir, spec, **kwargs):
        calls.append(role)
        echo = "held" if timed_gate == "hold" else "fused"
        eager = {"median_ms": 0.01, "method": "gated", "gate": timed_gate, "echo": echo}
        result = {"ok": True, "eager": eager, "compiled": None, "precision": "fp32"}
        return isolate.ChildOutcome(result, None, False, False, "", 1.0)

    monkeypatch.setattr(isolate, "run_child", child)
    monkeypatch.setattr(mps, "in_use", lambda: True)
    monkeypatch.setenv("KBV3_GATE", "hold")
    monkeypatch.delenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", raising=False)
    spec = {"device": "cuda", "problem_path": "p.py", "sizes": {"n": 4}, "seeds": [42]}
    args = {"problem_sha256": "sha", "device_name": "H200", "cache_dir": tmp_path, "timeout_s": 30}
    first = baseline.get_baseline(spec, **args)
    second = baseline.get_baseline(spec, **args)
    if timed_gate == "hold":
        assert second["cached"] is True and len(calls) == 1
    else:
        assert "timed with gate 'spin'" in first["not_cached_because"]
        assert second["cached"] is False and len(calls) == 2 and first["baseline_ms"] == 0.01


@pytest.mark.parametrize("timed_gate, cached", [("pdl-go", True), ("spin", True), ("wait", False)])
def test_under_a_graph_gate_a_reference_held_by_the_spin_is_cached(tmp_path, monkeypatch, timed_gate, cached):
    """An eager reference that cannot be captured is held by the spin kernel under a graph gate
    every time (`local._graph_gated`): its figure is the key's mode's, so it is kept, and the next
    evaluation does not time the baseline again. Another gate's figure is not."""
    from kernelbench_v3.evaluate import mps
    from kernelbench_v3.evaluate.protocol import gate
    from kernelbench_v3.evaluate.supervisor.reference import isolate

    calls = []

    def child(role, workdir, spec, **kwargs):
        calls.append(role)
        eager = {"median_ms": 0.01, "method": "gated", "gate": timed_gate, "echo": "fused"}
        return isolate.ChildOutcome({"ok": True, "eager": eager, "precision": "fp32"}, None, False, False, "", 1.0)

    monkeypatch.setattr(isolate, "run_child", child)
    monkeypatch.setattr(mps, "in_use", lambda: True)
    monkeypatch.setattr(gate, "_device_capability", lambda: (9, 0))  # the default: pdl-go
    monkeypatch.delenv("KBV3_GATE", raising=False)
    spec = {"device": "cuda", "problem_path": "p.py", "sizes": {"n": 4}, "seeds": [42]}
    args = {"problem_sha256": "sha", "device_name": "H200", "cache_dir": tmp_path, "timeout_s": 30}
    baseline.get_baseline(spec, **args)
    second = baseline.get_baseline(spec, **args)
    assert second["cached"] is cached and len(calls) == (1 if cached else 2)
