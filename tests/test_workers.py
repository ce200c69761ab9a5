"""The life of a long-lived evaluation worker is one module (`workers`, issue 29 point 16):
the batch's workers and the service's agree on the watchdog because they read the same one,
and neither reaches into the evaluator's warm-zygote pool by `getattr`."""

from __future__ import annotations

import inspect

import pytest

from kernelbench_v3 import workers
from kernelbench_v3.batch import executors, ray_executor
from kernelbench_v3.serve import slot, worker


def test_the_watchdog_is_the_step_limit_times_a_factor_plus_slack():
    assert workers.watchdog_s(10.0) == 10.0 * workers.WATCHDOG_FACTOR + workers.WATCHDOG_SLACK_S
    assert workers.watchdog_s(None) == workers.DEFAULT_TIMEOUT_S * workers.WATCHDOG_FACTOR + workers.WATCHDOG_SLACK_S


def test_batch_and_serve_keep_no_watchdog_of_their_own():
    for module in (executors, slot, worker):
        names = set(vars(module))
        assert not names & {"WATCHDOG_FACTOR", "WATCHDOG_SLACK_S", "WORKER_START_S"}, module.__name__
        assert "workers" in names  # they read `workers`, the one place


def test_no_getattr_on_the_evaluators_pool():
    for module in (worker, executors, workers):
        assert "getattr(" not in inspect.getsource(module), module.__name__


def test_a_lost_cuda_context_is_seen_and_a_healthy_or_absent_one_is_not(monkeypatch):
    import sys
    import types

    from kernelbench_v3 import workers

    def fake_torch(initialized: bool, error: Exception | None):
        def synchronize():
            if error is not None:
                raise error

        cuda = types.SimpleNamespace(is_initialized=lambda: initialized, synchronize=synchronize)
        return types.SimpleNamespace(cuda=cuda)

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert workers.cuda_context_lost() is False  # torch never imported: nothing to lose
    monkeypatch.setitem(sys.modules, "torch", fake_torch(False, RuntimeError("never used")))
    assert workers.cuda_context_lost() is False  # CUDA never initialised in this process
    monkeypatch.setitem(sys.modules, "torch", fake_torch(True, None))
    assert workers.cuda_context_lost() is False
    monkeypatch.setitem(sys.modules, "torch", fake_torch(True, RuntimeError("an illegal memory access")))
    assert workers.cuda_context_lost() is True


def test_a_local_batch_worker_launches_its_zygote_at_its_start(monkeypatch):
    import os

    warmed = []
    monkeypatch.setattr(workers, "warm_up", lambda start_on=None: warmed.append(start_on))
    monkeypatch.setattr(workers, "exit_when_orphaned", lambda pid: None)

    class Done:
        def recv(self):
            return None  # told to stop at once

    executors._worker_main(Done(), {}, lambda item, settings: {}, os.getpid(), "cpu")
    assert warmed == ["cpu"]  # not with the first item: its torch import runs beside the worker's


@pytest.mark.slow
def test_a_ray_task_keeps_the_zygote_and_reference_warm_for_the_next_task_there(monkeypatch):
    from kernelbench_v3.batch.queue import BatchItem, BatchSettings

    warmed = []
    monkeypatch.setattr(workers, "warm_up", lambda start_on=None: warmed.append(start_on))
    item = BatchItem("m", "H100", "level1/23_Softmax", "/x/sol.py", "0")
    record = ray_executor.ray_evaluate(
        item, BatchSettings(split="h100", device="cpu"), b"x = 1\n", lambda i, s: {"ok": 1}
    )
    assert warmed == [None] and record["ok"] == 1


def test_the_pool_closes_every_warm_zygote_it_holds_and_removes_its_log(tmp_path):
    from kernelbench_v3.evaluate.supervisor.run.zygote_pool import ZygotePool

    logs = tmp_path
    closed = []

    class Fake:
        def __init__(self, name):
            self.name = name
            self.log_path = logs / f"{name}.log"
            self.log_path.write_text("zygote output")

        def close(self):
            closed.append(self.name)

    pool = ZygotePool()
    pool._zygotes = {"cpu": Fake("cpu"), "cuda": Fake("cuda")}
    pool.close()
    assert sorted(closed) == ["cpu", "cuda"] and pool._zygotes == {}
    assert not (tmp_path / "cpu.log").exists() and not (tmp_path / "cuda.log").exists()


def test_the_service_waits_for_its_zygote_before_ready_a_batch_worker_does_not(monkeypatch):
    import kernelbench_v3.evaluate as api

    events = []

    class Zygote:
        def wait_ready(self):
            events.append("zygote ready")

    monkeypatch.setattr(api, "start_warm_zygote", lambda device: events.append(f"launch {device}") or Zygote())
    monkeypatch.setattr(api, "load_supervisor", lambda: events.append("supervisor imported"))
    monkeypatch.setattr(api, "keep_zygotes_warm", lambda: None)
    monkeypatch.setattr(api, "keep_references_warm", lambda: None)
    workers.warm_up(start_on="cpu", wait=True)
    assert events == ["launch cpu", "supervisor imported", "zygote ready"]  # the import beside the zygote's
    events.clear()
    workers.warm_up(start_on="cpu")
    assert events == ["launch cpu", "supervisor imported"]
    source = inspect.getsource(worker.main)
    assert "warm_up(start_on=args.device, wait=True)" in source


def test_a_cli_verbs_zygote_leaves_the_pool_as_it_found_it(monkeypatch):
    from kernelbench_v3.evaluate.supervisor.run import zygote_pool

    pool = zygote_pool.ZygotePool()
    monkeypatch.setattr(zygote_pool, "POOL", pool)
    monkeypatch.setattr(pool, "get", lambda device, served=False, server_module=None: f"zygote for {device}")
    assert zygote_pool.start_warm_zygote("cpu") == "zygote for cpu" and pool.enabled
    zygote_pool.close_warm_zygotes()
    assert not pool.enabled  # `kbv3 eval` run in-process: the caller's evaluations start their own again
    zygote_pool.keep_zygotes_warm()  # a long-lived worker
    zygote_pool.start_warm_zygote("cpu")
    zygote_pool.close_warm_zygotes()
    assert pool.enabled and pool.kept
