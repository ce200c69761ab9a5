"""The evaluation service: one warm supervisor worker per GPU behind an owner-only Unix socket.

`Server(socket_path, device=..., gpus=...)` binds the socket (0600, in a folder only its owner
can write, created 0700 when missing), starts one worker process per GPU (`worker`; on the CPU,
one), and answers each connection's frames (`protocol`) in a thread of its own. An `evaluate`
request is checked, then queued on the GPU it names (`gpu_index`) or on the least loaded; each
GPU's queue is served in order by one dispatcher thread that hands the job to its worker and
waits for the record.

The socket itself is `listen`'s, one GPU's worker and queue `slot`'s. A worker that dies
(killed, out of memory, a crash of the evaluator itself) or outlives its watchdog
(`workers.watchdog_s`, as in a batch) costs the request it was running: that client gets an error Record saying so, and the
worker is started again; the service goes on. `shutdown()` (a `shutdown` request, SIGTERM or
SIGINT) stops accepting, removes the socket file, answers every queued or running request with
an error Record, and stops the workers.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .listen import ServeError, bind_owner_only, hung_up, prepare_socket_path
from .protocol import BadRequest, Conn, PeerGone, ProtocolError, parse_evaluate, peer_uid
from .slot import POLL_S, STOP_GRACE_S, Job, Slot

log = logging.getLogger(__name__)

__all__ = ["ServeError", "Server", "Slot", "Job", "bind_owner_only", "prepare_socket_path", "serve"]


def worker_command() -> list[str]:
    return [sys.executable, "-m", "kernelbench_v3.serve.worker"]


def cpu_env() -> dict[str, str]:
    return {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(os.cpu_count() or 1))}


class Server:
    """The service; `serve_forever()` until `shutdown()`. `command` starts a worker (tests put a
    stand-in there)."""

    def __init__(
        self,
        socket_path: str | os.PathLike,
        *,
        device: str = "cpu",
        gpus: Sequence[int] | None = None,
        problems_dir: str | os.PathLike | None = None,
        cache_dir: str | os.PathLike | None = None,
        command: Sequence[str] | None = None,
    ):
        if device not in ("cuda", "cpu"):
            raise ValueError(f"device must be cuda or cpu, got {device!r}")
        if device == "cuda" and not gpus:
            raise ValueError("a CUDA service needs the GPU indices it serves")
        self.device = device
        self.problems_dir = str(Path(problems_dir).absolute()) if problems_dir else None
        self.cache_dir = str(Path(cache_dir).absolute()) if cache_dir else None
        command = list(command or worker_command())
        if device == "cuda":
            self.slots = [Slot(f"gpu{g}", g, {"CUDA_VISIBLE_DEVICES": str(g)}, device, command) for g in gpus or ()]
        else:
            self.slots = [Slot("cpu0", None, cpu_env(), device, command)]
        self.path = prepare_socket_path(socket_path)
        self.listener, self._inode = bind_owner_only(self.path)
        self.listener.settimeout(POLL_S)
        self.started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        self._stop = threading.Event()
        self._closed = False
        self._conns: set[Conn] = set()
        self._lock = threading.Lock()
        try:
            for slot in self.slots:
                slot.start_worker()  # warm from the start: torch, the zygote, CUDA
                slot.thread.start()
        except BaseException:
            self.close()
            raise

    def _say(self, text: str) -> None:
        log.info(text)  # `serve()` (and so `kbv3 serve`) shows these on stderr

    # --- serving

    def serve_forever(self) -> None:
        where = ", ".join(s.name for s in self.slots)
        self._say(f"listening on {self.path} ({self.device}: {where}); pid {os.getpid()}")
        try:
            while not self._stop.is_set():
                try:
                    sock, _ = self.listener.accept()
                except TimeoutError:
                    continue
                except OSError:
                    if self._stop.is_set():
                        break
                    raise
                threading.Thread(target=self._handle, args=(sock,), daemon=True, name="kbv3-serve-conn").start()
        finally:
            self.close()

    def shutdown(self) -> None:
        """Ask `serve_forever` to stop (from a signal handler, a request or another thread)."""
        self._stop.set()

    def _handle(self, sock: socket.socket) -> None:
        conn = Conn(sock)
        try:
            uid = peer_uid(sock)
            if uid is not None and uid != os.getuid():
                conn.send({"kind": "error", "error": "this service answers only its own user"})
                return
            with self._lock:
                self._conns.add(conn)
            while not self._stop.is_set():
                try:
                    message = conn.receive()
                except ProtocolError as exc:
                    conn.send({"kind": "error", "error": f"protocol: {exc}"})
                    return
                reply = self.answer(message, conn)
                if reply is None:  # the client left before its evaluation started
                    return
                conn.send(reply)
                if message["kind"] == "shutdown":
                    return
        except PeerGone:
            pass
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()

    def answer(self, message: dict[str, Any], conn: Conn | None = None) -> dict[str, Any] | None:
        """The reply to one request; None when its client (`conn`) went away while it was
        still queued (it is then dropped from the queue, unevaluated)."""
        kind = message["kind"]
        if kind == "status":
            return self.status()
        if kind == "shutdown":
            self.shutdown()
            return {"kind": "bye"}
        if kind != "evaluate":
            return {"kind": "error", "error": f"unknown request kind {kind!r}; use evaluate, status or shutdown"}
        if self._stop.is_set():
            return {"kind": "error", "error": "the service is shutting down"}
        try:
            job = parse_evaluate(message, self.device)
            job["problems_dir"] = job["problems_dir"] or self.problems_dir
            job["cache_dir"] = job["cache_dir"] or self.cache_dir
            slot = self.pick(job.pop("gpu_index"))
        except BadRequest as exc:
            return {"kind": "error", "error": str(exc)}
        queued = Job(job)
        problem = job["request"].get("problem_id", "?")
        slot.put(queued)
        self._say(f"{problem}: queued on {slot.name} ({slot.load()} waiting or running there)")
        while not queued.done.wait(POLL_S):
            if conn is not None and hung_up(conn.sock) and slot.cancel(queued):
                self._say(f"{problem}: dropped from {slot.name}'s queue, its client left")
                return None
        reply = queued.reply or {"kind": "error", "error": "no reply"}
        self._say(_served_line(problem, slot.name, reply))
        return reply

    def pick(self, gpu_index: int | None) -> Slot:
        """The slot of the GPU a request names, else the least loaded (the first among equals)."""
        if gpu_index is None:
            return min(self.slots, key=lambda s: s.load())
        for slot in self.slots:
            if slot.gpu_index == gpu_index:
                return slot
        served = ", ".join(str(s.gpu_index) for s in self.slots if s.gpu_index is not None) or "none (CPU)"
        raise BadRequest(f"this service has no GPU {gpu_index}; it serves GPU(s) {served}")

    def status(self) -> dict[str, Any]:
        return {
            "kind": "status",
            "pid": os.getpid(),
            "device": self.device,
            "socket": str(self.path),
            "started_at": self.started,
            "workers": [slot.status() for slot in self.slots],
        }

    # --- stopping

    def close(self) -> None:
        """Stop accepting, remove the socket file, fail what is queued or running, stop workers."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        self.listener.close()
        try:
            if self.path.lstat().st_ino == self._inode:  # ours, not a successor's
                self.path.unlink()
        except FileNotFoundError:
            pass
        for slot in self.slots:
            with slot.cond:
                slot.stopping = True
                slot.cond.notify_all()
            slot.fail_queued("the service shut down before this evaluation started")
        for slot in self.slots:
            if slot.thread.is_alive():
                slot.thread.join(STOP_GRACE_S + 2 * POLL_S)
            slot.stop_worker()
        deadline = time.monotonic() + STOP_GRACE_S  # let waiting clients get their replies
        while time.monotonic() < deadline:
            with self._lock:
                if not self._conns:
                    break
            time.sleep(0.05)
        with self._lock:
            for conn in list(self._conns):
                try:
                    conn.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._say("stopped")


def _served_line(problem: str, worker: str, reply: dict[str, Any]) -> str:
    """The log line of one answered request: which problem, which worker, the verdict, how long."""
    if reply.get("kind") != "record":
        return f"{problem}: {worker} answered an error: {reply.get('error')}"
    record = reply.get("record") or {}
    check = f" ({record['failed_check']})" if record.get("failed_check") else ""
    return (
        f"{problem}: {record.get('status', '?')}{check} on {worker} in {reply.get('run_s', 0):.1f} s "
        f"(queued {reply.get('queued_s', 0):.1f} s)"
    )


def _log_to_stderr() -> None:
    """`kbv3 serve: ...` lines on stderr for the service's loggers, unless logging is set up."""
    package = logging.getLogger("kernelbench_v3")
    if package.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("kbv3 serve: %(message)s"))
    package.addHandler(handler)
    package.setLevel(logging.INFO)


def serve(
    socket_path,
    *,
    device: str,
    gpus: Sequence[int] | None = None,
    problems_dir=None,
    cache_dir=None,
    command: Sequence[str] | None = None,
) -> int:
    """Run the service in this process until SIGTERM, SIGINT or a `shutdown` request; what it
    says (listening, stopped, a worker restarted) goes to stderr unless the caller has set up
    logging of its own."""
    import signal

    _log_to_stderr()

    server = Server(
        socket_path, device=device, gpus=gpus, problems_dir=problems_dir, cache_dir=cache_dir, command=command
    )

    def stop(signum, frame):
        server.shutdown()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.serve_forever()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
