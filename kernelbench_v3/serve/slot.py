"""One GPU (or the CPU) of `kbv3 serve`: its warm worker process, its queue of requests, and
the dispatcher thread that serves the queue in order.

Owns a worker's lifecycle as the service sees it: starting it (`serve.worker`, its GPU pinned,
one end of a socket pair), waiting for `ready`, handing it one job at a time, and the watchdog
(`workers.watchdog_s`, shared with the batch's workers): a worker that dies or stays silent past
it costs the job it was running an error Record, and is started again.
"""

from __future__ import annotations

import collections
import logging
import os
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import workers
from ..evaluate import kill_descendants
from .protocol import Conn, Deadline, PeerGone, ProtocolError, error_record

STOP_GRACE_S = 5.0
POLL_S = 0.25

log = logging.getLogger(__name__)


class Job:
    """One queued evaluation and the reply its client waits for."""

    def __init__(self, job: dict[str, Any]):
        self.job = job
        self.queued_at = time.monotonic()
        self.started_at: float | None = None
        self.reply: dict[str, Any] | None = None
        self.done = threading.Event()

    def finish(self, reply: dict[str, Any]) -> None:
        if self.reply is None:
            self.reply = reply
            self.done.set()

    def watchdog_s(self) -> float:
        return workers.watchdog_s(self.job["request"].get("timeout_s"))


class Slot:
    """One GPU (or the CPU): its worker process, its queue, the thread that serves the queue in order."""

    def __init__(self, name: str, gpu_index: int | None, env: dict[str, str], device: str, command: Sequence[str]):
        self.name, self.gpu_index, self.env, self.device = name, gpu_index, env, device
        self.command = list(command)
        self.queue: collections.deque[Job] = collections.deque()
        self.cond = threading.Condition()
        self.current: Job | None = None
        self.process: subprocess.Popen | None = None
        self.conn: Conn | None = None
        self.ready = False
        self.restarts = 0
        self.served = 0
        self.stopping = False
        self.thread = threading.Thread(target=self._loop, name=f"kbv3-serve-{name}", daemon=True)

    # --- the worker process

    def start_worker(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = {**os.environ, **self.env}
        package_root = str(Path(__file__).resolve().parents[2])  # the worker imports this very package
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
        try:
            self.process = subprocess.Popen(
                [*self.command, "--fd", str(theirs.fileno()), "--device", self.device, "--name", self.name],
                env=env,
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # a terminal's Ctrl-C is the service's to handle, not its workers'
            )
        finally:
            theirs.close()
        self.conn, self.ready = Conn(ours), False

    def kill_worker(self) -> int | None:
        """Kill the worker and everything below it (its zygote, and what a solution detached there
        into a session of its own: `kill_descendants`); its exit code."""
        code = None
        if self.process is not None:
            if self.process.poll() is None:
                kill_descendants(self.process.pid, stop_root=True)
                self.process.kill()
            try:
                code = self.process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        if self.conn is not None:
            self.conn.close()
        self.process, self.conn, self.ready = None, None, False
        return code

    def stop_worker(self) -> None:
        if self.process is not None and self.process.poll() is None and self.conn is not None:
            try:
                self.conn.send({"kind": "stop"})
                self.process.wait(STOP_GRACE_S)
            except (PeerGone, subprocess.TimeoutExpired):
                pass
        self.kill_worker()

    def alive(self) -> bool:
        process = self.process
        return process is not None and process.poll() is None

    # --- the queue

    def load(self) -> int:
        with self.cond:
            return len(self.queue) + (self.current is not None)

    def put(self, job: Job) -> None:
        with self.cond:
            if not self.stopping:
                self.queue.append(job)
                self.cond.notify()
                return
        job.finish(self._failed(job, "the service shut down before this evaluation started"))

    def _take(self) -> Job | None:
        """The next job in order (None when stopping); while idle, notes the worker's `ready`."""
        while True:
            with self.cond:
                if self.stopping:
                    return None
                if self.queue:
                    self.current = self.queue.popleft()
                    return self.current
                if self.ready or self.conn is None:
                    self.cond.wait(POLL_S)
                    continue
            self._await_ready()

    def _await_ready(self) -> None:
        try:
            message = self.conn.receive(POLL_S)
        except Deadline:
            return
        except (PeerGone, ProtocolError):  # died while idle: started again by the next job
            self.kill_worker()
            self.restarts += 1
            return
        if message["kind"] == "ready":
            self.ready = True

    def _loop(self) -> None:
        while (job := self._take()) is not None:
            job.started_at = time.monotonic()
            try:
                reply = self._run(job)
            except Exception as exc:  # a bug here must not leave the client waiting forever
                self.kill_worker()
                reply = self._failed(job, f"the service failed on this request: {type(exc).__name__}: {exc}")
            with self.cond:
                self.current = None
                if reply.get("kind") == "record":
                    self.served += 1
                    reply.update(
                        worker=self.name,
                        sequence=self.served,
                        queued_s=round(job.started_at - job.queued_at, 3),
                        run_s=round(time.monotonic() - job.started_at, 3),
                    )
            job.finish(reply)

    def _run(self, job: Job) -> dict[str, Any]:
        """Hand `job` to the worker and wait for its reply; a worker that dies or hangs costs
        this job an error record and is started again."""
        if not self.alive():
            if self.process is not None:
                self.kill_worker()
                self.restarts += 1
            try:
                self.start_worker()
            except OSError as exc:
                return self._failed(job, f"the service could not start worker {self.name}: {exc}")
        sent = time.monotonic()
        deadline = sent + job.watchdog_s() + (0 if self.ready else workers.WORKER_START_S)
        try:
            self.conn.send({"kind": "evaluate", **job.job})
            while True:
                if self.stopping:
                    self.kill_worker()
                    return self._failed(job, "the service shut down during this evaluation")
                try:
                    message = self.conn.receive(min(POLL_S, max(0.0, deadline - time.monotonic())))
                except Deadline:
                    if time.monotonic() >= deadline:
                        log.warning(
                            "worker %s silent past its watchdog (%.0f s): restarting it", self.name, job.watchdog_s()
                        )
                        self.kill_worker()
                        self.restarts += 1
                        self.start_worker()
                        return self._failed(
                            job,
                            f"service watchdog: no result from worker {self.name} within "
                            f"{job.watchdog_s():.0f} s; the worker was killed and restarted",
                        )
                    continue
                kind = message["kind"]
                if kind == "ready":
                    self.ready = True
                elif kind == "started":
                    deadline = time.monotonic() + job.watchdog_s()
                elif kind in ("record", "error"):
                    return message
                else:
                    raise ProtocolError(f"worker sent {kind!r}")
        except (PeerGone, ProtocolError) as exc:
            if self.stopping:
                self.kill_worker()
                return self._failed(job, "the service shut down during this evaluation")
            code = self.kill_worker()
            self.restarts += 1
            how = (
                f"exit code {code}" if code is not None and code >= 0 else f"signal {-code}" if code else "no exit code"
            )
            log.warning("worker %s died during an evaluation (%s): restarting it", self.name, how)
            detail = f" ({exc})" if isinstance(exc, ProtocolError) else ""
            try:
                self.start_worker()  # warm again before the next request
            except OSError:
                pass  # the next request tries again
            return self._failed(
                job,
                f"the service's worker {self.name} died during this evaluation ({how}){detail}; "
                "it was restarted and the service goes on",
            )

    def _failed(self, job: Job, error: str) -> dict[str, Any]:
        return {"kind": "record", "record": error_record(job.job, error)}

    def cancel(self, job: Job) -> bool:
        """Drop `job` if it is still waiting in the queue (not once it has started)."""
        with self.cond:
            if job in self.queue:
                self.queue.remove(job)
                return True
            return False

    def fail_queued(self, error: str) -> None:
        with self.cond:
            jobs, self.queue = list(self.queue), collections.deque()
        for job in jobs:
            job.finish(self._failed(job, error))

    def status(self) -> dict[str, Any]:
        process = self.process
        alive = process is not None and process.poll() is None
        with self.cond:
            return {
                "name": self.name,
                "gpu_index": self.gpu_index,
                "pid": process.pid if alive else None,
                "alive": alive,
                "ready": self.ready,
                "busy": self.current is not None,
                "queued": len(self.queue),
                "served": self.served,
                "restarts": self.restarts,
            }
