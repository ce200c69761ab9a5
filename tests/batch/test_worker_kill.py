"""A batch worker killed by the watchdog takes everything below it along: its zygote and what a
solution detached there into its own session (before, the zygote died first, by its parent-death
signal, and handed such a process on to init)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from kernelbench_v3.batch.queue import BatchItem, BatchSettings
from kernelbench_v3.batch.run import run_batch
from kernelbench_v3.evaluate.options import EvalOptions
from kernelbench_v3.evaluate.process_tree import alive
from tests.paths import PROBLEMS
from tests.serve.fake_worker import zygote_with_a_detached_process


def stalls_with_a_detached_process(item: BatchItem, settings: BatchSettings) -> dict:
    """Stands in for an evaluator whose zygote (a subreaper that dies with its parent) holds a
    process a solution detached, and which then hangs past the batch watchdog."""
    zygote_with_a_detached_process(Path(item.solution_path).read_text().strip())
    time.sleep(600)
    raise AssertionError("the watchdog should have killed this worker")


@pytest.mark.slow
def test_a_worker_killed_by_the_watchdog_leaves_no_detached_process(tmp_path, monkeypatch):
    from kernelbench_v3 import workers

    monkeypatch.setattr(workers, "WATCHDOG_SLACK_S", 3.0)
    pid_file = tmp_path / "detached.pid"
    solution = tmp_path / "sols" / "level1" / "23_Softmax.py"
    solution.parent.mkdir(parents=True)
    solution.write_text(str(pid_file))
    settings = BatchSettings(
        split="h100", device="cpu", problems_root=str(PROBLEMS), options=EvalOptions(timeout_s=0.5)
    )
    detached = None
    try:
        result = run_batch(
            solution.parent.parent,
            tmp_path / "out.parquet",
            settings,
            workers=1,
            evaluate_fn=stalls_with_a_detached_process,
            progress=False,
        )
        (record,) = result.records
        assert "watchdog" in record["error"]
        detached = int(pid_file.read_text())
        deadline = time.monotonic() + 5
        while alive(detached) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(detached)
    finally:
        if detached is not None and alive(detached):
            os.kill(detached, signal.SIGKILL)
