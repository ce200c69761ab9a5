"""Executors: where the evaluations of a batch run.

Owns turning a `BatchItem` into an evaluator call (`evaluate_item`, run inside a worker), the
record a batch writes when an evaluation could not produce one (`failure_record`), and two
executors with one interface, `run(queue, on_record)`:

- `LocalExecutor`: one long-lived worker process per GPU (spawned with `CUDA_VISIBLE_DEVICES`
  set to that GPU; on CPU, N workers), fed one evaluation at a time. Each evaluation is isolated
  by the evaluator's own sandboxed solution process; a worker that dies or outlives its watchdog costs only
  the record it was working on and is replaced.
- `RayExecutor`: one Ray task per evaluation, requesting one GPU (one CPU on the CPU device);
  Ray does the placement, results stream back with `ray.wait`. The solution's text travels with
  the task, so workers on other hosts need only the package installed, not the folder.

`on_record` journals the record durably before the executor hands that worker new work. Nothing
here imports `datasets`, and `torch` only inside workers.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import tempfile
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import wait as wait_for
from pathlib import Path
from typing import Any

from .. import workers
from .discover import importable_path
from .queue import BatchItem, BatchSettings, WorkQueue

log = logging.getLogger(__name__)

EvaluateFn = Callable[[BatchItem, BatchSettings], dict[str, Any]]
OnRecord = Callable[[BatchItem, dict[str, Any], str], None]  # item, record, worker (e.g. "gpu0")

STARTED = "started"  # what a worker sends when it begins an item
RETIRING = "retiring"  # ... and before a record it sends as its last (its CUDA context is lost)
RAY_WORKER_KEY = "_kbv3_ray_worker"  # carried next to a Ray task's record, removed before journaling


# ----------------------------------------------------------------------------- one evaluation


def evaluate_item(item: BatchItem, settings: BatchSettings) -> dict[str, Any]:
    """Run the evaluator on one item (inside a worker); returns the record as a dict."""
    from ..catalog.problem import get_problem
    from ..evaluate import evaluate

    problem = get_problem(item.problem_id, settings.problems_root)
    sizes: dict[str, Any] = {}
    if settings.sizes == "reduced":
        sizes = problem.reduced
    elif settings.device == "cpu":
        # The evaluator reads no sizes on the CPU as "reduced": `--shapes default` there names
        # the file's own sizes, or it would be silently ignored. (On CUDA none means default.)
        sizes = dict(problem.sizes)
    request = settings.options.request(
        item.problem_id,
        importable_path(Path(item.solution_path)),
        gpu=settings.split,
        device=settings.device,
        sizes=sizes,
        model=item.model,
    )
    return evaluate(request, problems_dir=settings.problems_root).to_dict()


def failure_record(
    item: BatchItem, settings: BatchSettings, error: str, status: str = "error", check: str | None = None
) -> dict[str, Any]:
    """A record with status "error" for an evaluation that produced none (worker died, ...), or
    with `status` "failed" and `check` "response" for a sample that has no solution file."""
    from ..catalog.problem import get_problem
    from ..evaluate import Record, device_name

    record = Record(
        model=item.model,
        gpu=item.gpu,
        problem_id=item.problem_id,
        problem=item.problem_id.rsplit("/", 1)[-1] + ".py",
        solution_path=item.solution_path,
        solution_sha256=item.solution_sha256,
        device=settings.device,
        # Named as an evaluated record names it (`cpu:<model>`, the GPU's name), so a report's
        # "ran on" reads the same for the batch's failed and evaluated records.
        ran_on=device_name(settings.device),
    )
    try:
        problem = get_problem(item.problem_id, settings.problems_root)
        record.level, record.op_type = problem.level, problem.op_type
        record.problem_sha256 = problem.sha256
    except (KeyError, OSError, ValueError):
        pass
    return record.fail(status, error, check).to_dict()


def stamp(record: dict[str, Any], item: BatchItem) -> dict[str, Any]:
    """The record with the batch key fields taken from the item, so the journal's keys always
    match the batch's own (the record describes the file the batch discovered)."""
    record = dict(record)
    record.update(
        model=item.model,
        gpu=item.gpu,
        problem_id=item.problem_id,
        solution_sha256=item.solution_sha256,
        solution_path=item.solution_path,
    )
    if item.sample is not None:  # only in the samples layout: other batches' records keep their columns
        record["sample"] = item.sample
    return record


def _call(evaluate_fn: EvaluateFn, item: BatchItem, settings: BatchSettings) -> dict[str, Any]:
    """evaluate_fn, with any exception turned into an error record (a worker never dies of it)."""
    try:
        return evaluate_fn(item, settings)
    except Exception:
        tail = traceback.format_exc(limit=8)[-2000:]
        return failure_record(item, settings, f"evaluator raised: {tail}")


# ----------------------------------------------------------------------------- local workers


def _worker_main(conn, env: dict[str, str], evaluate_fn: EvaluateFn, parent_pid: int, device: str | None) -> None:
    """A worker process: pin to its GPU, then evaluate items until told to stop."""
    os.environ.update(env)  # before anything in this process touches CUDA
    workers.exit_when_orphaned(parent_pid)  # the batch was SIGKILLed: do not keep evaluating
    # One zygote per worker (a fresh solution process per item) and the last problem's
    # reference. The zygote is launched at once, so its torch import runs beside the worker's
    # own and the first item does not wait for it; a worker's start is its own allowance.
    workers.warm_up(start_on=device)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        item, settings = message
        conn.send(STARTED)
        record = _call(evaluate_fn, item, settings)
        if workers.cuda_context_lost():  # said before the record: a fresh worker takes the next item
            conn.send(RETIRING)
            conn.send(record)
            return
        conn.send(record)


class _Worker:
    """One worker process and the item it is evaluating."""

    def __init__(self, name: str, env: dict[str, str], evaluate_fn: EvaluateFn, device: str | None = None):
        self.name, self.env, self.evaluate_fn, self.device = name, env, evaluate_fn, device
        self.process = None
        self.conn = None
        self.item: BatchItem | None = None
        self.deadline = 0.0
        self.watchdog_s = 0.0
        self.last_group: tuple[str, str] | None = None  # the (problem, GPU) it last evaluated
        self.retiring = False  # it said its next record is its last

    def ensure_started(self) -> None:
        if self.process is not None and self.process.is_alive():
            return
        context = multiprocessing.get_context("spawn")  # never fork a parent that holds torch
        parent_end, child_end = context.Pipe()
        self.process = context.Process(
            target=_worker_main,
            name=f"kbv3-batch-{self.name}",
            daemon=True,
            args=(child_end, self.env, self.evaluate_fn, os.getpid(), self.device),
        )
        self.process.start()
        child_end.close()
        self.conn = parent_end

    def start(self, item: BatchItem, settings: BatchSettings, watchdog_s: float) -> None:
        self.ensure_started()
        self.item = item
        self.watchdog_s = watchdog_s
        self.deadline = time.monotonic() + workers.WORKER_START_S + watchdog_s
        self.conn.send((item, settings))

    def collect(self) -> dict[str, Any] | str | None:
        """The record if one arrived, an error text if the worker died, None if still working."""
        try:
            while self.conn.poll():
                message = self.conn.recv()
                if message == RETIRING:
                    self.retiring = True
                elif message != STARTED:
                    if self.retiring:  # its last record: the next item starts a fresh worker
                        self.kill()
                    return message
                self.deadline = time.monotonic() + self.watchdog_s
        except (EOFError, OSError):
            pass
        if not self.process.is_alive():
            code = self.process.exitcode
            self.kill()
            log.warning("batch worker %s died (exit code %s); its item gets an error record", self.name, code)
            return f"batch worker {self.name} died (exit code {code}) during the evaluation"
        if time.monotonic() > self.deadline:
            self.kill()
            log.warning("batch worker %s silent past its watchdog: killed", self.name)
            return f"batch watchdog: no result from worker {self.name} in time; worker killed"
        return None

    def kill(self) -> None:
        if self.process is not None and self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        if self.conn is not None:
            self.conn.close()
        self.process, self.conn, self.retiring = None, None, False

    def stop(self) -> None:
        if self.process is not None and self.process.is_alive() and self.item is None:
            try:
                self.conn.send(None)
            except OSError:
                pass
            self.process.join(5)
        self.kill()


class LocalExecutor:
    """One worker process per slot; `slots` maps a worker name to its environment."""

    def __init__(
        self, settings: BatchSettings, slots: dict[str, dict[str, str]], evaluate_fn: EvaluateFn = evaluate_item
    ):
        self.settings = settings
        self.slots = slots
        self.evaluate_fn = evaluate_fn
        self.watchdog_s = workers.watchdog_s(settings.timeout_s)

    def run(self, queue: WorkQueue, on_record: OnRecord) -> None:
        device = self.settings.device
        workers = [_Worker(name, env, self.evaluate_fn, device) for name, env in self.slots.items()]
        try:
            while not queue.finished():
                for worker in workers:
                    if worker.item is None and (item := queue.take(worker.last_group)) is not None:
                        worker.last_group = queue.group(item)
                        worker.start(item, self.settings, self.watchdog_s)
                busy = [w for w in workers if w.item is not None]
                if not busy:
                    raise RuntimeError("work queue stalled with nothing running")  # a bug
                wait_for([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout=1.0)
                for worker in busy:
                    outcome = worker.collect()
                    if outcome is None:
                        continue
                    item, worker.item = worker.item, None
                    if isinstance(outcome, str):
                        outcome = failure_record(item, self.settings, outcome)
                    on_record(item, outcome, worker.name)
                    queue.finish(item, outcome)
        finally:
            for worker in workers:
                worker.stop()


def local_slots(device: str, gpus: list[int] | None, workers: int) -> dict[str, dict[str, str]]:
    """Worker environments: one per GPU (pinned), or `workers` CPU workers sharing the cores."""
    if device == "cuda":
        if gpus is None:
            import torch

            gpus = list(range(torch.cuda.device_count()))
        if not gpus:
            raise RuntimeError("no CUDA GPU visible; pass --device cpu or --gpus")
        return {f"gpu{g}": {"CUDA_VISIBLE_DEVICES": str(g)} for g in gpus}
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    threads = str(max(1, (os.cpu_count() or 1) // workers))
    env = {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", threads)}
    return {f"cpu{i}": dict(env) for i in range(workers)}


# ----------------------------------------------------------------------------- Ray


def ray_evaluate(item: BatchItem, settings: BatchSettings, source: bytes, evaluate_fn: EvaluateFn) -> dict[str, Any]:
    """The body of one Ray task: evaluate `source` (the solution's bytes) as `item`. Ray reuses
    its worker processes, so the zygote and the last reference are kept for the next task there."""
    workers.warm_up()
    with tempfile.TemporaryDirectory(prefix="kbv3-ray-") as folder:
        local = Path(folder) / Path(item.solution_path).name.removesuffix(".txt")
        local.write_bytes(source)
        here = BatchItem(item.model, item.gpu, item.problem_id, str(local), item.solution_sha256)
        return {**_call(evaluate_fn, here, settings), RAY_WORKER_KEY: _ray_worker_name()}


def _ray_worker_name() -> str:
    """Which node and GPU ran this Ray task, for the batch's per-worker throughput."""
    try:
        import ray

        if not ray.is_initialized():  # not in a Ray task: asking for a context would start Ray
            return "ray"
        context = ray.get_runtime_context()
        gpus = ",".join(str(g) for g in context.get_accelerator_ids().get("GPU", []))
        return f"{context.get_node_id()[:8]}" + (f":gpu{gpus}" if gpus else "")
    except Exception:
        return "ray"


class RayExecutor:
    """One Ray task per evaluation; Ray places them (one GPU each) across the cluster."""

    def __init__(
        self,
        settings: BatchSettings,
        address: str | None,
        gpus: list[int] | None,
        workers: int,
        evaluate_fn: EvaluateFn = evaluate_item,
    ):
        self.settings, self.address, self.gpus, self.workers = settings, address, gpus, workers
        self.evaluate_fn = evaluate_fn

    def _init(self) -> bool:
        import ray

        if ray.is_initialized():
            return False
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no phoning home
        if self.address:
            ray.init(address=self.address, log_to_driver=False)
            return True
        # Local: an in-process cluster sized to this batch, no dashboard, loopback only.
        if self.settings.device == "cuda" and self.gpus is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, self.gpus))
        resources: dict[str, Any] = {"num_cpus": self.workers}
        if self.settings.device == "cuda":
            resources = {"num_cpus": max(self.workers, len(self.gpus or [0]))}
            if self.gpus is not None:
                resources["num_gpus"] = len(self.gpus)
        ray.init(include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1", **resources)
        return True

    def run(self, queue: WorkQueue, on_record: OnRecord) -> None:
        import ray

        started_here = self._init()
        need = {"num_gpus": 1, "num_cpus": 1} if self.settings.device == "cuda" else {"num_cpus": 1}
        task = ray.remote(ray_evaluate).options(max_retries=0, **need)
        pending: dict[Any, BatchItem] = {}
        try:
            while not queue.finished():
                while (item := queue.take()) is not None:
                    source = Path(item.solution_path).read_bytes()
                    pending[task.remote(item, self.settings, source, self.evaluate_fn)] = item
                done, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                for ref in done:
                    item = pending.pop(ref)
                    try:
                        record = dict(ray.get(ref), solution_path=item.solution_path)
                        worker = str(record.pop(RAY_WORKER_KEY, "ray"))
                    except Exception as exc:  # worker or node died; the task is not retried
                        message = f"ray task failed: {type(exc).__name__}: {exc}"[-2000:]
                        record, worker = failure_record(item, self.settings, message), "ray"
                    on_record(item, record, worker)
                    queue.finish(item, record)
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)
            if started_here:
                ray.shutdown()


def make_executor(
    kind: str,
    settings: BatchSettings,
    *,
    gpus: list[int] | None = None,
    workers: int = 1,
    address: str | None = None,
    evaluate_fn: EvaluateFn | None = None,
):
    evaluate_fn = evaluate_fn or evaluate_item
    if kind == "local":
        if address:
            raise ValueError("--address is for --executor ray")
        return LocalExecutor(settings, local_slots(settings.device, gpus, workers), evaluate_fn)
    if kind == "ray":
        return RayExecutor(settings, address, gpus, workers, evaluate_fn)
    raise ValueError(f"unknown executor {kind!r}; choose local or ray")
