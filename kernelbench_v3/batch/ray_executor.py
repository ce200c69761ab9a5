"""The Ray executor: one Ray task per evaluation, requesting one GPU (one CPU on the CPU device).

Ray does the placement and results stream back with `ray.wait`; the interface is the local
executor's, `run(queue, on_record)`. The solution's text travels with the task, so workers on
other hosts need only the package installed, not the folder. Ray reuses its worker processes, so
the zygote and the last reference stay warm there. Nothing here imports `ray` until a batch runs.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from .. import workers
from .items import EvaluateFn, OnRecord, evaluate_item, evaluate_safely, failure_record
from .queue import BatchItem, BatchSettings, WorkQueue

RAY_WORKER_KEY = "_kbv3_ray_worker"  # carried next to a Ray task's record, removed before journaling


def ray_evaluate(item: BatchItem, settings: BatchSettings, source: bytes, evaluate_fn: EvaluateFn) -> dict[str, Any]:
    """The body of one Ray task: evaluate `source` (the solution's bytes) as `item`. Ray reuses
    its worker processes, so the zygote and the last reference are kept for the next task there."""
    workers.warm_up()
    with tempfile.TemporaryDirectory(prefix="kbv3-ray-") as folder:
        local = Path(folder) / Path(item.solution_path).name.removesuffix(".txt")
        local.write_bytes(source)
        here = BatchItem(item.model, item.gpu, item.problem_id, str(local), item.solution_sha256)
        return {**evaluate_safely(evaluate_fn, here, settings), RAY_WORKER_KEY: _ray_worker_name()}


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


__all__ = ["RAY_WORKER_KEY", "RayExecutor", "ray_evaluate"]
