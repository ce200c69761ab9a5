"""Executors: where the evaluations of a batch run, with one interface, `run(queue, on_record)`.

- `LocalExecutor`: long-lived worker processes on this host, fed one evaluation at a time:
  on CUDA `workers` per GPU (spawned with `CUDA_VISIBLE_DEVICES` set to it; default
  `WORKERS_PER_GPU`, one on the rtx3090 split's 24 GB cards), on the CPU `workers` in all. Each evaluation is isolated by the
  evaluator's own sandboxed solution process; a worker that dies or outlives its watchdog costs
  only the record it was working on and is replaced. Workers that share a GPU take turns lent by
  this process (`gpu_share.TurnTable`): one's reference phase runs while the other's solution
  runs, and a solution process and every timed second have the GPU to themselves. An item whose
  evaluation was lost to the other worker's fault (under MPS one client's fault reaches every
  client) runs again once on a fresh worker; one that ran out of GPU memory beside the other
  worker's evaluation runs again once with the GPU to itself.
- `RayExecutor` (`ray_executor`): one Ray task per evaluation, one GPU each.

`on_record` journals the record durably before the executor hands that worker new work. Nothing
here imports `datasets`, and `torch` only inside workers.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from multiprocessing.connection import wait as wait_for
from typing import Any

from .. import workers
from ..evaluate import kill_descendants, ran_out_of_memory
from .gpu_share import GRANTED, PipeLender, TurnTable, is_turn_message
from .items import EvaluateFn, OnRecord, evaluate_item, evaluate_safely, failure_record
from .queue import BatchItem, BatchSettings, WorkQueue

log = logging.getLogger(__name__)

STARTED = "started"  # what a worker sends when it begins an item
RETIRING = "retiring"  # ... and before a record it sends as its last (its CUDA context is lost)
WORKERS_PER_GPU = 2  # a local batch's default on CUDA: the next reference beside this solution
# ... but one on the 24 GB cards of the rtx3090 split: a solution may fill 90% of the device
# (`CUDA_MEMORY_FRACTION`), and a second supervisor's references would take room it has alone.
ONE_WORKER_SPLITS = ("rtx3090",)


def _worker_main(
    conn, env: dict[str, str], evaluate_fn: EvaluateFn, parent_pid: int, device: str | None, shares_gpu: bool = False
) -> None:
    """A worker process: pin to its GPU, then evaluate items until told to stop."""
    os.environ.update(env)  # before anything in this process touches CUDA
    if env.get("OMP_NUM_THREADS", "").isdigit():  # torch may be imported already: its pool read the variable then
        import torch

        torch.set_num_threads(max(1, int(env["OMP_NUM_THREADS"])))
    workers.exit_when_orphaned(parent_pid)  # the batch was SIGKILLed: do not keep evaluating
    # One zygote per worker (a fresh solution process per item) and the last problem's
    # reference. The zygote is launched at once, so its torch import runs beside the worker's
    # own and the first item does not wait for it; a worker's start is its own allowance.
    workers.warm_up(start_on=device)
    turns = None
    if shares_gpu:
        from ..evaluate import GpuTurns

        turns = GpuTurns(PipeLender(conn))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        item, settings = message
        conn.send(STARTED)
        record = evaluate_safely(evaluate_fn, item, settings, turns)
        if workers.cuda_context_lost():  # said before the record: a fresh worker takes the next item
            conn.send(RETIRING)
            conn.send(record)
            return
        conn.send(record)


class _Worker:
    """One worker process, the item it is evaluating, and the turns of the GPU it shares."""

    def __init__(
        self,
        name: str,
        env: dict[str, str],
        evaluate_fn: EvaluateFn,
        device: str | None = None,
        table: TurnTable | None = None,
    ):
        self.name, self.env, self.evaluate_fn, self.device = name, env, evaluate_fn, device
        self.table = table  # None: this worker has its GPU (or CPU share) to itself
        self.process = None
        self.conn = None
        self.item: BatchItem | None = None
        self.deadline = 0.0
        self.watchdog_s = 0.0
        self.last_group: tuple[str, str] | None = None  # the (problem, GPU) it last evaluated
        # It said its next record is its last (its CUDA context is lost); set until its next item.
        self.context_lost = False
        self.alone = False  # its item runs again with the GPU to itself (no neighbour starts work)

    def ensure_started(self) -> None:
        if self.process is not None and self.process.is_alive():
            return
        context = multiprocessing.get_context("spawn")  # never fork a parent that holds torch
        parent_end, child_end = context.Pipe()
        self.process = context.Process(
            target=_worker_main,
            name=f"kbv3-batch-{self.name}",
            daemon=True,
            args=(child_end, self.env, self.evaluate_fn, os.getpid(), self.device, self.table is not None),
        )
        self.process.start()
        child_end.close()
        self.conn = parent_end

    def start(self, item: BatchItem, settings: BatchSettings, watchdog_s: float) -> None:
        self.ensure_started()
        self.item = item
        self.watchdog_s = watchdog_s
        self.deadline = time.monotonic() + workers.WORKER_START_S + watchdog_s
        self.context_lost = self.alone = False
        self.conn.send((item, settings))

    def grant(self) -> None:
        """Its turn came (`TurnTable.notify`): the wait was the other's work, so the watch restarts."""
        self.deadline = time.monotonic() + self.watchdog_s
        try:
            self.conn.send(GRANTED)
        except (OSError, AttributeError):  # gone meanwhile: `collect` finds it dead
            pass

    def collect(self) -> dict[str, Any] | str | None:
        """The record if one arrived, an error text if the worker died, None if still working."""
        try:
            while self.conn.poll():
                message = self.conn.recv()
                if is_turn_message(message) and self.table is not None:
                    try:
                        self.table.handle(self.name, message)
                    except ValueError as exc:  # a bug in the turns' order: the evaluation errs, nothing hangs
                        self.conn.send(str(exc))
                    continue
                if message == RETIRING:
                    self.context_lost = True
                elif message != STARTED:
                    if self.context_lost:  # its last record: the next item starts a fresh worker
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
        waiting = self.table is not None and self.table.waits(self.name)
        if time.monotonic() > self.deadline and not waiting:
            self.kill()
            log.warning("batch worker %s silent past its watchdog: killed", self.name)
            return f"batch watchdog: no result from worker {self.name} in time; worker killed"
        return None

    def kill(self) -> None:
        """End the worker and everything below it: its zygote, and whatever a solution spawned
        there, detached processes in their own sessions too (the zygote, their subreaper, would
        otherwise die first and hand them on to init)."""
        if self.process is not None and self.process.is_alive():
            kill_descendants(self.process.pid, stop_root=True)
            self.process.kill()
            self.process.join(5)
        if self.conn is not None:
            self.conn.close()
        self.process, self.conn = None, None

    def stop(self) -> None:
        if self.process is not None and self.process.is_alive() and self.item is None:
            try:
                self.conn.send(None)
            except OSError:
                pass
            self.process.join(5)
        self.kill()


class LocalExecutor:
    """One worker process per slot; `slots` maps a worker name to its environment, and `gpu_of`
    the workers that share a GPU to it (default: by `CUDA_VISIBLE_DEVICES` on CUDA)."""

    def __init__(
        self,
        settings: BatchSettings,
        slots: dict[str, dict[str, str]],
        evaluate_fn: EvaluateFn = evaluate_item,
        gpu_of: dict[str, str] | None = None,
    ):
        self.settings = settings
        self.slots = slots
        self.evaluate_fn = evaluate_fn
        self.watchdog_s = workers.watchdog_s(settings.timeout_s)
        if gpu_of is None and settings.device == "cuda":
            gpu_of = {name: env.get("CUDA_VISIBLE_DEVICES", "") for name, env in slots.items()}
        self.gpu_of = gpu_of or {}

    def _workers(self) -> list[_Worker]:
        by_name: dict[str, _Worker] = {}
        tables: dict[str, TurnTable] = {}
        for gpu in set(self.gpu_of.values()):
            if sum(1 for g in self.gpu_of.values() if g == gpu) > 1:  # shared: its turns are lent here
                tables[gpu] = TurnTable(lambda name: by_name[name].grant())
        for name, env in self.slots.items():
            table = tables.get(self.gpu_of.get(name, ""))
            by_name[name] = _Worker(name, env, self.evaluate_fn, self.settings.device, table)
        return list(by_name.values())

    def run(self, queue: WorkQueue, on_record: OnRecord) -> None:
        workers = self._workers()
        again: set[Any] = set()  # items already run again (a neighbour's fault, out of memory)
        alone: list[tuple[BatchItem, str]] = []  # (item, its GPU): to run again once that GPU is idle
        try:
            while not queue.finished():
                for item, gpu in list(alone):  # their GPU drains first: no new work starts on it
                    idle = [w for w in workers if self.gpu_of.get(w.name) == gpu and w.item is None]
                    if len(idle) == sum(1 for w in workers if self.gpu_of.get(w.name) == gpu):
                        alone.remove((item, gpu))
                        idle[0].last_group = queue.group(item)
                        idle[0].start(item, self.settings, self.watchdog_s)
                        idle[0].alone = True
                held = {self.gpu_of.get(w.name) for w in workers if w.item is not None and w.alone}
                held |= {gpu for _, gpu in alone}
                for worker in workers:
                    if worker.item is not None or self.gpu_of.get(worker.name) in held:
                        continue
                    if (item := queue.take(worker.last_group)) is not None:
                        worker.last_group = queue.group(item)
                        worker.start(item, self.settings, self.watchdog_s)
                busy = [w for w in workers if w.item is not None]
                if not busy and not alone:
                    raise RuntimeError("work queue stalled with nothing running")  # a bug
                wait_for([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout=1.0)
                for worker in busy:
                    outcome = worker.collect()
                    if outcome is None:
                        continue
                    item, worker.item = worker.item, None
                    if worker.table is not None:  # an evaluation that ended, or a worker killed, holds no turn
                        worker.table.forget(worker.name)
                    if _lost_to_a_neighbour(worker, outcome) and item.key not in again:
                        again.add(item.key)
                        log.warning("%s: its context was lost with another's; it runs again", item.problem_id)
                        queue.put_back(item)
                        continue
                    if _out_of_memory_beside_a_neighbour(worker, outcome) and item.key not in again:
                        again.add(item.key)
                        log.warning(
                            "%s: out of GPU memory beside another evaluation; it runs again alone", item.problem_id
                        )
                        alone.append((item, self.gpu_of.get(worker.name, "")))  # still running for the queue
                        continue
                    if isinstance(outcome, str):
                        outcome = failure_record(item, self.settings, outcome)
                    on_record(item, outcome, worker.name)
                    queue.finish(item, outcome)
        finally:
            for worker in workers:
                worker.stop()


def _lost_to_a_neighbour(worker: _Worker, outcome: Any) -> bool:
    """An error record from a lost CUDA context on a shared GPU: the other worker's solution may
    have faulted the device (MPS), so the error need not be this item's."""
    return (
        worker.table is not None
        and worker.context_lost
        and isinstance(outcome, dict)
        and outcome.get("status") == "error"
    )


def _out_of_memory_beside_a_neighbour(worker: _Worker, outcome: Any) -> bool:
    """A failed record that ran out of GPU memory on a shared GPU: the other worker's evaluation
    (its reference, its baseline's compile) may have held the memory, so the failure need not be
    this item's. It runs again once with the GPU to itself, and that record stands, whatever it
    is (a solution that raises such an error itself only buys a second, stricter run)."""
    if worker.table is None or not isinstance(outcome, dict) or outcome.get("status") not in ("incorrect", "error"):
        return False
    return ran_out_of_memory(str(outcome.get("error") or ""))


def local_slots(device: str, gpus: list[int] | None, workers: int | None) -> dict[str, dict[str, str]]:
    """Worker environments: `workers` per GPU (pinned; named gpu0, or gpu0a, gpu0b... when
    several share one), or `workers` CPU workers sharing the cores.

    On CUDA each worker's torch threads (`OMP_NUM_THREADS`, unless set) share the cores but one
    per GPU and one more: a timed call is timed by the host's clock, and a neighbour's host work
    (a reference model built on the CPU, 5.6 GB for level4/5) on every core would delay the timer
    (`cuda_threads`)."""
    if device == "cuda":
        if gpus is None:
            import torch

            gpus = list(range(torch.cuda.device_count()))
        if not gpus:
            raise RuntimeError("no CUDA GPU visible; pass --device cpu or --gpus")
        per_gpu = WORKERS_PER_GPU if workers is None else workers
        if not 1 <= per_gpu <= 26:
            raise ValueError(f"workers per GPU must be 1 to 26, got {per_gpu}")
        threads = os.environ.get("OMP_NUM_THREADS") or str(cuda_threads(os.cpu_count() or 1, len(gpus), per_gpu))

        def slot(g: int) -> dict[str, str]:
            return {"CUDA_VISIBLE_DEVICES": str(g), "OMP_NUM_THREADS": threads}

        if per_gpu == 1:
            return {f"gpu{g}": slot(g) for g in gpus}
        letters = "abcdefghijklmnopqrstuvwxyz"[:per_gpu]
        return {f"gpu{g}{x}": slot(g) for g in gpus for x in letters}
    workers = 1 if workers is None else workers
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    threads = str(max(1, (os.cpu_count() or 1) // workers))
    env = {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", threads)}
    return {f"cpu{i}": dict(env) for i in range(workers)}


def cuda_threads(cores: int, gpus: int, per_gpu: int) -> int:
    """Torch threads for each CUDA worker: the cores less one per GPU (its timer) and one (the
    batch's parent and the system), shared by the workers; at least one."""
    return max(1, (cores - gpus - 1) // (gpus * per_gpu))


def make_executor(
    kind: str,
    settings: BatchSettings,
    *,
    gpus: list[int] | None = None,
    workers: int | None = None,
    address: str | None = None,
    evaluate_fn: EvaluateFn | None = None,
):
    """`workers`: local on CUDA, workers per GPU (default `WORKERS_PER_GPU`, one for the splits
    of `ONE_WORKER_SPLITS`); on the CPU and under Ray, workers in all (default 1)."""
    evaluate_fn = evaluate_fn or evaluate_item
    if kind == "local":
        if address:
            raise ValueError("--address is for --executor ray")
        if workers is None and settings.device == "cuda" and settings.split in ONE_WORKER_SPLITS:
            workers = 1
        return LocalExecutor(settings, local_slots(settings.device, gpus, workers), evaluate_fn)
    if kind == "ray":
        from .ray_executor import RayExecutor

        return RayExecutor(settings, address, gpus, workers or 1, evaluate_fn)
    raise ValueError(f"unknown executor {kind!r}; choose local or ray")


__all__ = ["ONE_WORKER_SPLITS", "WORKERS_PER_GPU", "LocalExecutor", "local_slots", "make_executor"]
