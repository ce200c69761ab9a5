"""The baseline server: cold baseline children forked from a process that has imported
torch.compile, instead of started from nothing.

A baseline child started as a program spends most of its work importing: the interpreter and
torch (2.0 s median on the H100), then torch.compile's dynamo and inductor (5.4 s), before about
2.5 s of building, compiling and timing (`benchmarks/results/throughput_gpu.md`, issue 42). The
baseline server is a CUDA-free process that has made those imports once (`import_compiler`);
for each cold baseline it forks a child that does what `python -m ...reference.child ROLE DIR`
would (`child.run_role`), in the caller's environment and folder, with its stdout and stderr in
the caller's pipe. `isolate.run_child` asks it first (`start`) and starts the program where no
server answers.

It is the warm zygote server's loop (`solution.zygote_server.server_main`: the name, the peer's
uid and pid checked, the exit after `KBV3_ZYGOTE_IDLE_S` idle) with other imports and one kind of
request, so the same reasons keep every sandboxed solution away from it: an abstract Unix socket
in the solution's own network namespace (no server is used where the sandbox cannot make one).
Only reference code runs in its children, the problem file the caller's spec names, as in the
program. One server per user and environment (the name fingerprints what the imports read);
`KBV3_ZYGOTE_SERVER=0` turns it off with the zygote server.

A forked child is what a started one is, in what decides a time: a fresh process with nothing
compiled in it, CUDA first opened by the child itself (the server refuses to serve if its
imports opened CUDA), the same `child_main`. It differs in two ways only: its parent is the
server, so it dies with the caller by a watch (`lifetime.die_with_process`) rather than the
kernel's parent-death signal, and no one can wait for its exit status, so it sends it on the
socket before it exits (`ServedChild` reads a child that ended without one as killed).
"""

from __future__ import annotations

import functools
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

from ... import compile_memos
from ...solution import zygote_server

SERVER_MODULE = "kernelbench_v3.evaluate.supervisor.reference.baseline_server"
KIND = "child"  # the one request this server serves
STARTED_WAIT_S = 10.0  # from a listening server's accept to the child's first words
DIED_UNSAID = -int(signal.SIGKILL)  # the status of a child that ended without sending its own
NVML_CHECK_ENV = "PYTORCH_NVML_BASED_CUDA_CHECK"  # torch.cuda.is_available() by NVML: no driver init


def wanted() -> bool:
    """Whether baseline children should come from the server: as for the zygote server (Linux,
    not turned off, and solutions get a network namespace of their own)."""
    return zygote_server.wanted()


def address(env: dict[str, str]) -> str:
    """The server's abstract socket name for this user and the environment its imports read."""
    return f"\0kbv3-baseline-{os.getuid()}-{zygote_server.fingerprint('baseline', env)}"


def import_compiler() -> None:
    """What every forked baseline child inherits, imported: torch, torch.compile's dynamo and
    inductor, Triton, and the child's own modules. Never CUDA: a server whose imports opened it
    could fork no child that can use it, so it refuses to serve (RuntimeError: `server_main`
    then refuses every request, and its callers start their children as programs).

    torch.compile's imports ask `torch.cuda.is_available()`, which by default asks the CUDA
    runtime for the device count: that initializes the driver and marks every later fork as one
    that cannot use CUDA ("Cannot re-initialize CUDA in forked subprocess": every served baseline
    on an H100). Asked through NVML instead (`PYTORCH_NVML_BASED_CUDA_CHECK`), it opens nothing.
    Whether a fork can still use CUDA is then proved by forking one (`_forks_can_use_cuda`)."""
    os.environ[NVML_CHECK_ENV] = "1"  # this process's own: a child takes its caller's environment
    import torch

    from ....catalog import materialize  # noqa: F401
    from ... import cases  # noqa: F401
    from . import baseline_child, child  # noqa: F401

    baseline_child.import_compiler()
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401

        if torch.cuda.is_available():  # through NVML: opens nothing
            compile_memos.warm_triton()  # inductor's kernels are Triton's: its per-process memos
    except Exception:
        pass
    if torch.cuda.is_initialized() or not _forks_can_use_cuda():
        raise RuntimeError("the baseline server's imports initialized CUDA: it cannot fork usable children")


def _forks_can_use_cuda() -> bool:
    """Whether a child forked now may initialize CUDA: torch marks a fork made after the driver
    was initialized as a bad fork (`torch.cuda._is_in_bad_fork`), where CUDA raises at first use."""
    import torch

    pid = os.fork()
    if pid == 0:
        os._exit(1 if torch.cuda._is_in_bad_fork() else 0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


# --- the server's forked child --------------------------------------------------------------


def become_child(conn: socket.socket, request: dict[str, Any], fds: list[int], import_s: float) -> NoReturn:
    """In the server's forked child: the caller's reference-only child (`child.run_role`), its
    status sent on `conn` before it exits. Never returns."""
    code = 1
    try:
        if len(fds) != 1:
            raise ValueError(f"a request sent {len(fds)} file descriptors, not its output pipe")
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # what it starts (inductor's workers) is waited for
        os.setsid()  # its own process group: the caller's kill takes whatever it starts
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        for target in (1, 2):
            os.dup2(fds[0], target)
        os.close(fds[0])
        from ...lifetime import die_with_process
        from .child import run_role

        die_with_process(int(request["pid"]))
        conn.send(json.dumps({"kind": "started", "pid": os.getpid()}).encode())
        served = {"server_pid": os.getppid(), "server_import_s": round(import_s, 3)}
        run_role(str(request["role"]), Path(request["cwd"]), {"served": served})
        code = 0
    except BaseException:  # noqa: BLE001 - said in the caller's pipe; the status says it failed
        import traceback

        traceback.print_exc()
    finally:
        zygote_server.leave(conn, {"kind": "exit", "code": code}, code)


# --- the caller's handle --------------------------------------------------------------------


class ServedChild:
    """The part of `subprocess.Popen` that `isolate.run_child` uses, for a child the server
    forked: `pid` (its process group's leader), `stdout` (the read end of its output pipe),
    `wait`, `poll`, `kill` and `returncode`. It has exited once its socket says so or closes."""

    def __init__(self, conn: socket.socket, pid: int, stdout: Any):
        self.conn, self.pid, self.stdout = conn, pid, stdout
        self.returncode: int | None = None
        self._killed = False

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"baseline child {self.pid}", timeout or 0.0)
            self._read(left)
        return self.returncode

    def kill(self) -> None:
        self._killed = True
        try:
            os.kill(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _read(self, timeout: float | None) -> None:
        ready, _, _ = select.select([self.conn], [], [], timeout)
        if not ready:
            return
        try:
            data = self.conn.recv(1 << 16)
        except OSError:
            data = b""
        if data:
            message = json.loads(data)
            if message.get("kind") == "exit" and not self._killed:
                self.returncode = int(message.get("code", 1))
                self.conn.close()
            return
        self.conn.close()
        if self.returncode is None:
            self.returncode = DIED_UNSAID


_failed: set[str] = set()  # names whose server this process launched and saw fail: not launched again


def start(role: str, workdir: Path, env: dict[str, str], wait_s: float) -> ServedChild | None:
    """A child of `role` for `workdir`, forked by this environment's server (launched now if none
    listens, then waited for up to `wait_s`), or None where no server serves one: the caller
    starts the program instead. A server that failed to start (its log is
    `kbv3-zygote-server-UID-baseline.log` in the temporary folder) is not launched again by this
    process, so a batch does not pay its imports twice per baseline."""
    name = address(env)
    conn = zygote_server.connect_to(name)
    if conn is None and name in _failed:
        return None
    if conn is None:
        launched = zygote_server.launch_server(name, "baseline", env, SERVER_MODULE)
        deadline = time.monotonic() + wait_s
        while conn is None and time.monotonic() < deadline:
            time.sleep(0.02)
            conn = zygote_server.connect_to(name)
            if conn is None and launched.poll() is not None:  # failed, or lost the name to one now gone
                conn = zygote_server.connect_to(name)
                break
        if conn is None:
            _failed.add(name)
            return None
    read_end, write_end = os.pipe()
    try:
        request = {"kind": KIND, "role": role, "pid": os.getpid(), "env": env, "cwd": str(workdir)}
        socket.send_fds(conn, [json.dumps(request).encode()], [write_end])
        os.close(write_end)
        write_end = -1
        conn.settimeout(STARTED_WAIT_S)
        reply = json.loads(conn.recv(1 << 16) or b"{}")
        conn.settimeout(None)
        if reply.get("kind") != "started":
            raise OSError(f"the baseline server answered {reply!r}")
        return ServedChild(conn, int(reply["pid"]), open(read_end, "rb"))
    except (OSError, ValueError):  # the server went away, or its child could not start
        conn.close()  # a child that started anyway finds its first send refused, and exits
        for fd in (read_end, write_end):
            if fd >= 0:
                os.close(fd)
        return None


def server_main(name: str, idle_s: float) -> None:
    """The server's program: `import_compiler`, then a child per request. A server whose imports
    cannot serve (CUDA opened) still listens, and answers every request with why it refuses, so
    each later caller starts its program child at once rather than launching another server and
    waiting for its imports again."""
    try:
        import_compiler()
        handler = become_child
    except Exception as exc:  # noqa: BLE001 - said to every caller, and in the server's log
        why = f"{type(exc).__name__}: {exc}"[:500]
        print(f"kbv3 baseline server: refusing to serve: {why}", flush=True)
        handler = functools.partial(refuse, why)
    zygote_server.server_main(name, idle_s, {KIND: handler}, warm=lambda: None, zygotes=False)


def refuse(why: str, conn: socket.socket, request: dict[str, Any], fds: list[int], import_s: float) -> NoReturn:
    """In the server's forked child, for a server that cannot serve: say why, and exit."""
    try:
        conn.send(json.dumps({"kind": "refused", "why": why}).encode())
    finally:
        os._exit(0)


if __name__ == "__main__":
    server_main("\0" + sys.argv[1], float(sys.argv[2]))
