"""The evaluation service: one warm supervisor worker per GPU behind an owner-only Unix socket.

`Server(socket_path, device=..., gpus=...)` binds the socket (0600, in a folder only its owner
can write, created 0700 when missing), starts one worker process per GPU (`worker`; on the CPU,
one), and answers each connection's frames (`protocol`) in a thread of its own. An `evaluate`
request is checked, then queued on the GPU it names (`gpu_index`) or on the least loaded; each
GPU's queue is served in order by one dispatcher thread that hands the job to its worker and
waits for the record.

A worker that dies (killed, out of memory, a crash of the evaluator itself) or outlives its
watchdog costs the request it was running: that client gets an error Record saying so, and the
worker is started again; the service goes on. `shutdown()` (a `shutdown` request, SIGTERM or
SIGINT) stops accepting, removes the socket file, answers every queued or running request with
an error Record, and stops the workers.
"""

from __future__ import annotations

import collections
import datetime as dt
import errno
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .protocol import (
    MAX_SOCKET_PATH,
    BadRequest,
    Conn,
    Deadline,
    PeerGone,
    ProtocolError,
    error_record,
    parse_evaluate,
    peer_uid,
)

# Past a request's own step limit (timeout_s), how long its worker may stay silent before the
# service assumes the evaluator itself is stuck (as in a batch: a few children, each bounded).
WATCHDOG_FACTOR = 4.0
WATCHDOG_SLACK_S = 120.0
WORKER_START_S = 600.0  # a worker's start (torch, its zygote, CUDA) has its own allowance
STOP_GRACE_S = 5.0
POLL_S = 0.25


class ServeError(Exception):
    """The service cannot start: the socket path is unusable or already served."""


def prepare_socket_path(path: str | os.PathLike) -> Path:
    """The absolute socket path, after checking its folder (created 0700 when missing; an
    existing one must be the user's or root's and writable by nobody else unless sticky, like
    /tmp) and what is already at the path: a live server there is refused, a stale socket file
    (its server gone) is removed, anything that is not a socket is refused."""
    path = Path(path).expanduser().absolute()
    if len(os.fsencode(str(path))) > MAX_SOCKET_PATH:
        raise ServeError(f"socket path {path} is longer than {MAX_SOCKET_PATH} bytes; choose a shorter one")
    parent = path.parent
    if not parent.exists():
        parent.mkdir(mode=0o700, parents=True)
        os.chmod(parent, 0o700)
    info = parent.stat()
    if not stat.S_ISDIR(info.st_mode):
        raise ServeError(f"{parent} is not a folder")
    if info.st_uid not in (os.getuid(), 0):
        raise ServeError(f"{parent} belongs to another user (uid {info.st_uid}); put the socket in a folder of yours")
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        raise ServeError(
            f"{parent} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}); "
            "put the socket in a folder only you can write (it is created 0700 when missing)"
        )
    try:
        existing = path.lstat()
    except FileNotFoundError:
        return path
    if not stat.S_ISSOCK(existing.st_mode):
        raise ServeError(f"{path} exists and is not a socket; choose another path (nothing was removed)")
    if existing.st_uid != os.getuid():
        raise ServeError(f"{path} is a socket of another user (uid {existing.st_uid}); choose another path")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        path.unlink(missing_ok=True)  # stale: its server is gone
        return path
    except OSError as exc:
        if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT):
            raise ServeError(f"cannot tell whether {path} is served: {exc}") from None
        path.unlink(missing_ok=True)
        return path
    finally:
        probe.close()
    raise ServeError(f"a server is already listening on {path}; stop it (Evaluator(path).shutdown()) or choose another")


def bind_owner_only(path: Path) -> tuple[socket.socket, int]:
    """A listening Unix socket at `path`, mode 0600 from the start; and its inode."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the socket file is born 0600: no window where others could connect
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(64)
    return sock, path.lstat().st_ino


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
        return float(self.job["request"].get("timeout_s") or 600.0) * WATCHDOG_FACTOR + WATCHDOG_SLACK_S


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
        """Kill the worker (its zygote and solution processes die with it); its exit code."""
        code = None
        if self.process is not None:
            if self.process.poll() is None:
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
        deadline = sent + job.watchdog_s() + (0 if self.ready else WORKER_START_S)
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


def _hung_up(sock: socket.socket) -> bool:
    """Whether the client closed its end (a request is answered only on an open connection)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True


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
        log=None,
    ):
        if device not in ("cuda", "cpu"):
            raise ValueError(f"device must be cuda or cpu, got {device!r}")
        if device == "cuda" and not gpus:
            raise ValueError("a CUDA service needs the GPU indices it serves")
        self.device = device
        self.problems_dir = str(Path(problems_dir).absolute()) if problems_dir else None
        self.cache_dir = str(Path(cache_dir).absolute()) if cache_dir else None
        self.log = log if log is not None else sys.stderr
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
        try:
            print(f"kbv3 serve: {text}", file=self.log, flush=True)
        except (OSError, ValueError):
            pass

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
        slot.put(queued)
        while not queued.done.wait(POLL_S):
            if conn is not None and _hung_up(conn.sock) and slot.cancel(queued):
                return None
        return queued.reply or {"kind": "error", "error": "no reply"}

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


def serve(
    socket_path,
    *,
    device: str,
    gpus: Sequence[int] | None = None,
    problems_dir=None,
    cache_dir=None,
    command: Sequence[str] | None = None,
) -> int:
    """Run the service in this process until SIGTERM, SIGINT or a `shutdown` request."""
    import signal

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
