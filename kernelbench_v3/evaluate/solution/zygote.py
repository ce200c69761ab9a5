"""The zygote: a trusted process that has imported torch and Triton (never CUDA) and forks a
fresh solution process per solution on the supervisor's request.

Why a zygote: a new Python process that imports torch and opens a CUDA context costs seconds;
a fork of a process that imported torch but never touched CUDA is CUDA-ready in a fraction of
that, and still gives every solution a process of its own. CUDA does not survive a fork, so the
zygote must never initialize it; the supervisor (which does) talks to it over a socket.

It also owns the clean-up: it is a child subreaper, so whatever a solution process spawns and
orphans (a double fork, a `setsid` daemon) is re-parented to it, and `reap` stops and kills every
descendant until none is left. It dies with the supervisor (parent-death signal and a watch),
and kills every descendant first: dying, it would hand them on to init.

Control messages are JSON over a SOCK_SEQPACKET socket; `spawn` carries the solution process's
channel socket and arena as passed file descriptors.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import compile_memos
from ..mps_reaper import LOG_ENV, PIPE_ENV
from ..process_tree import descendants, kill_descendants
from . import triton_seed

PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY", "CREDENTIAL")
LOG_NAME = "output.log"  # the solution process's stdout and stderr, in its scratch folder
# What a spawn request may set in the child's environment (None: unset): the MPS daemon's folders,
# which the supervisor may learn after the zygote started.
SPAWN_ENV = (PIPE_ENV, LOG_ENV)
_seed_folder: Path | None = None  # where Triton's driver helper is seeded (`triton_seed`), set by `serve`


def _prctl(option: int, value: int) -> bool:
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


# --- process tree ---------------------------------------------------------------------------

REAP_GRACE_S = 0.5  # how long finished solution processes get to exit before a reap kills them


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_solution_processes() -> int:
    """Stop, then kill, every process below the zygote until none is left; returns how many."""
    return kill_descendants(os.getpid(), reap=_reap)


# --- the zygote process ---------------------------------------------------------------------


def _exit_status(pid: int, wait_s: float) -> str:
    """How a solution process ended, in words ("" while it is still running)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return "it had already been reaped"
        if done:
            if os.WIFSIGNALED(status):
                return f"it died from signal {signal.Signals(os.WTERMSIG(status)).name}"
            return f"it exited with code {os.WEXITSTATUS(status)}"
        if time.monotonic() >= deadline:
            return ""
        time.sleep(0.02)


def _set_limits(address_space_bytes: int | None, file_size_bytes: int | None) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if file_size_bytes:  # a larger write (a flood of output, a filled disk) kills the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_bytes, file_size_bytes))
    if address_space_bytes:  # the CPU only: CUDA reserves far more address space than it uses
        resource.setrlimit(resource.RLIMIT_AS, (address_space_bytes, address_space_bytes))


def _confine(scratch: Path, msg: dict[str, Any]) -> dict[str, Any]:
    """Limits and sandbox for the solution process; what was applied, as the record reports it."""
    _set_limits(msg.get("address_space_bytes"), msg.get("file_size_bytes"))
    try:
        from . import sandbox
    except ImportError as exc:  # a broken install: say so in the record rather than not evaluate
        return {"kind": "none", "notes": [f"the sandbox module could not be imported: {exc}"]}
    return sandbox.enter_sandbox([str(scratch)], allow_network=False).to_dict()


def apply_spawn_env(env: dict[str, Any]) -> None:
    """The supervisor's SPAWN_ENV at the spawn, not at the zygote's start: a zygote started before
    the MPS daemon (beside it) still gives its children the daemon's folders. CUDA reads them at
    its first use, which in a fresh solution process is still to come. Other names are ignored."""
    for name, value in env.items():
        if name in SPAWN_ENV:
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = str(value)


def _child(msg: dict[str, Any], fds: list[int]) -> None:
    """In the forked solution process: isolate, then serve. Never returns."""
    code = 3
    try:
        os.setsid()
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the zygote's last words are not its children's
        scratch = Path(msg["scratch"])
        for name in list(os.environ):
            if name.startswith(("KBV3_", "HF_")) or any(w in name.upper() for w in SECRET_WORDS):
                os.environ.pop(name, None)
        apply_spawn_env(msg.get("env") or {})
        os.environ.update(
            TRITON_CACHE_DIR=str(scratch / "triton"),
            TMPDIR=str(scratch / "tmp"),
            HOME=str(scratch),
            TORCHINDUCTOR_CACHE_DIR=str(scratch / "inductor"),
        )
        import tempfile

        tempfile.tempdir = None  # the zygote may have cached /tmp; the solution's temp folder is its scratch
        for sub in ("triton", "tmp"):
            (scratch / sub).mkdir(exist_ok=True)
        if str(msg["device"]).startswith("cuda"):  # Triton's driver helper, built by trusted code
            triton_seed.seed_into(_seed_folder, scratch / "triton")
        os.chdir(scratch)
        # The solution's prints go to its own log in its scratch folder, never to the caller's
        # stdout; the supervisor keeps the tail and fails a flood (FLOOD_BYTES).
        log = os.open(scratch / LOG_NAME, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        from . import worker

        report = _confine(scratch, msg)
        sock_fd, arena_fd = fds
        link = worker.Link(socket.socket(fileno=sock_fd))
        startup_s = worker.wait_for_device(msg["device"])
        link.send({"kind": "ready", "pid": os.getpid(), "sandbox": {**report, "device_open_s": startup_s}})
        worker.serve(link, arena_fd, int(msg["arena_size"]), msg["device"])
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def import_warm() -> None:
    """What every forked solution process inherits, ready: torch, the worker, Triton with what it
    memoizes at a first compile (`compile_memos.warm_triton`), and torch's lazy global patches made
    (`guard.settle_lazy_torch_patches`). Never CUDA."""
    import torch  # noqa: F401

    from . import worker  # noqa: F401
    from .guard import settle_lazy_torch_patches

    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401

        compile_memos.warm_triton()
    except Exception:
        pass
    settle_lazy_torch_patches()


def serve(ctl: socket.socket, ready: dict[str, Any]) -> None:
    """Say `ready` on `ctl`, then fork solution processes and report on them as the supervisor
    asks, until it says exit or goes away. Never returns."""
    global _seed_folder
    _seed_folder = triton_seed.seed_folder()  # under this zygote's cache root (its caller's env)
    # CLOCK_MONOTONIC is one clock for every process of the machine: the supervisor subtracts
    # its launch time from `ready_at` to learn what the zygote's start cost (beside its own work).
    ctl.send(json.dumps({**ready, "ready_at": time.monotonic()}).encode())
    while True:
        data, fds, _, _ = socket.recv_fds(ctl, 1 << 16, 4)
        if not data:
            break
        msg = json.loads(data)
        if msg["kind"] == "spawn":
            pid = os.fork()
            if pid == 0:
                ctl.close()
                _child(msg, fds)
            for fd in fds:
                os.close(fd)
            ctl.send(json.dumps({"kind": "spawned", "pid": pid}).encode())
        elif msg["kind"] == "status":
            ctl.send(
                json.dumps({"kind": "status", "status": _exit_status(int(msg["pid"]), float(msg["wait_s"]))}).encode()
            )
        elif msg["kind"] == "reap":
            # A solution process that answered `finish` is on its way out: give it (and the
            # echo) a moment to exit, so only what was really left behind is killed and counted.
            deadline = time.monotonic() + REAP_GRACE_S
            while descendants(os.getpid()) and time.monotonic() < deadline:
                _reap()
                time.sleep(0.01)
            ctl.send(json.dumps({"kind": "reaped", "killed": kill_solution_processes()}).encode())
        else:
            break
    kill_solution_processes()
    os._exit(0)


def main(ctl_fd: int, device: str) -> None:
    from ..lifetime import die_with_parent

    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    # Its death would hand what a solution detached on to init: those die first.
    die_with_parent(int(os.environ.get("KBV3_PARENT_PID") or 0), last_words=kill_solution_processes)
    started = time.monotonic()
    import_warm()
    serve(
        socket.socket(fileno=ctl_fd),
        {"kind": "zygote_ready", "pid": os.getpid(), "import_s": time.monotonic() - started},
    )


# --- the supervisor's handle ----------------------------------------------------------------


def zygote_env(device: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a zygote for `device` runs in: this process's, `env` over it, the package
    importable and Triton interpreting on the CPU only."""
    package_parent = str(Path(__file__).resolve().parents[2])
    child_env = {
        **os.environ,
        **(env or {}),
        "TRITON_INTERPRET": "1" if device == "cpu" else "0",
        "PYTHONUNBUFFERED": "1",
    }
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, child_env.get("PYTHONPATH", "")) if p)
    return child_env


@dataclass
class Spawned:
    pid: int
    sock: socket.socket  # the supervisor's end of the solution process's channel


class Zygote:
    """The supervisor's handle on a zygote process for one device kind."""

    def __init__(self, device: str, log_path: Path, env: dict[str, str] | None = None):
        self.device, self.log_path = device, log_path
        self.ctl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernelbench_v3.evaluate.solution.zygote", str(theirs.fileno()), device],
            pass_fds=[theirs.fileno()],
            env={**zygote_env(device, env), "KBV3_PARENT_PID": str(os.getpid())},
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        theirs.close()
        self.launched_at = time.monotonic()
        self.ready: dict[str, Any] | None = None

    def exited(self) -> bool:
        """Whether the zygote process has ended (one not yet known has not)."""
        return self.proc is not None and self.proc.poll() is not None

    @property
    def start_s(self) -> float | None:
        """Seconds from the launch to the zygote's ready (None before it was read)."""
        ready_at = (self.ready or {}).get("ready_at")
        return None if ready_at is None else max(0.0, float(ready_at) - self.launched_at)

    def _receive(self, timeout_s: float) -> dict[str, Any]:
        self.ctl.settimeout(timeout_s)
        try:
            data = self.ctl.recv(1 << 16)
        except TimeoutError:
            raise TimeoutError(f"the zygote did not answer within {timeout_s:.0f} s") from None
        if not data:
            raise RuntimeError(f"the zygote exited (code {self.proc.poll()})")
        return json.loads(data)

    def wait_ready(self, timeout_s: float = 300.0) -> dict[str, Any]:
        if self.ready is None:
            self.ready = self._receive(timeout_s)
        return self.ready

    def spawn(self, *, scratch: Path, arena_fd: int, arena_size: int, limits: dict[str, Any]) -> Spawned:
        """Fork a solution process; it gets this (the supervisor's) process's SPAWN_ENV as now."""
        self.wait_ready()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        msg = {"kind": "spawn", "scratch": str(scratch), "device": self.device, "arena_size": arena_size, **limits}
        msg["env"] = {name: os.environ.get(name) for name in SPAWN_ENV}
        socket.send_fds(self.ctl, [json.dumps(msg).encode()], [theirs.fileno(), arena_fd])
        theirs.close()
        reply = self._receive(60.0)
        return Spawned(int(reply["pid"]), ours)

    def exit_status(self, pid: int, wait_s: float = 2.0) -> str:
        """How solution process `pid` ended ("" if it is still running after `wait_s`)."""
        self.ctl.send(json.dumps({"kind": "status", "pid": pid, "wait_s": wait_s}).encode())
        return str(self._receive(wait_s + 30.0)["status"])

    def reap(self) -> int:
        """Kill every process the solution processes left (the zygote stays). Before its ready
        was read no spawn was asked (a spawn waits for it): nothing to kill, nothing to wait for."""
        if self.ready is None:
            return 0
        self.ctl.send(json.dumps({"kind": "reap"}).encode())
        return int(self._receive(60.0)["killed"])

    def close(self) -> None:
        """End the zygote and whatever it still holds. One that never said ready has forked
        nothing (a spawn waits for ready), so it is killed at once rather than waited for
        through the rest of its torch import."""
        if self.ready is not None:
            try:
                self.ctl.send(json.dumps({"kind": "exit"}).encode())
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self.ctl.close()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
