"""Where an agent run's evaluations happen: one at a time, on the thread that started the run.

Owns the hand-over between episodes (each on its own thread, talking to the model) and the
evaluator. Evaluations run one at a time because they share the device (two timings at once on
one GPU would disturb each other; on the CPU they would share its cores), and on the run's own
thread because the evaluator's child processes are tied to the thread that starts them (Linux's
parent-death signal follows the thread) and Ctrl-C reaches that thread. An episode waiting for
the desk is told how long it waited, so that wait is not counted against its time limit.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

T = TypeVar("T")


class DeskClosed(RuntimeError):
    """The run is stopping (Ctrl-C, an endpoint without tools): no evaluation will run."""


class Desk:
    """Jobs from any thread, run by `serve` on the run's thread, in the order they came."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._jobs: queue.Queue = queue.Queue()
        self._clock = clock
        self._closed = threading.Event()

    def run(self, job: Callable[[], T]) -> tuple[T, float]:
        """Run `job` at the desk and wait for it; returns (its result, seconds waited before it
        started). Raises what the job raised, or DeskClosed once the run stops."""
        if self._closed.is_set():
            raise DeskClosed("the run is stopping")
        future: Future = Future()
        self._jobs.put((job, future, self._clock()))
        while True:
            try:
                return future.result(timeout=0.2)
            except FutureTimeout:
                if self._closed.is_set() and not future.running():
                    raise DeskClosed("the run is stopping") from None

    def serve(self, until: Callable[[], bool], poll_s: float = 0.05) -> None:
        """Run jobs as they come until `until()` is true and none is waiting."""
        while True:
            try:
                job, future, queued_at = self._jobs.get(timeout=poll_s)
            except queue.Empty:
                if until():
                    return
                continue
            if not future.set_running_or_notify_cancel():
                continue
            waited = self._clock() - queued_at
            try:
                result: Any = job()
            except BaseException as exc:  # noqa: BLE001 - handed to the episode; Ctrl-C also stops the run
                future.set_exception(exc if isinstance(exc, Exception) else DeskClosed("interrupted"))
                if not isinstance(exc, Exception):
                    raise
            else:
                future.set_result((result, waited))

    def close(self) -> None:
        """No more jobs: waiting episodes get DeskClosed."""
        self._closed.set()
