"""The warm server: a zygote that outlives one `kbv3 eval`, so the next one starts warm.

A `kbv3 eval` spends most of its wall time waiting for its zygote's import of torch and Triton
(5-7 s of a 12.7 s median on the H200, `benchmarks/results/small_kernels_gpu.md`). The warm
server is a CUDA-free process that has done that import once (`zygote.import_warm`) and, for each
`kbv3 eval` that connects, forks a fresh zygote for it alone: the same process that `zygote.main`
would have become, ready in milliseconds. That zygote takes the caller's environment and working
folder, watches the caller's pid (`lifetime.die_with_process`) and its socket, and serves it
exactly as a zygote started by the caller does (`zygote.serve`); the solution processes it forks
are confined as always. The server forks nothing else and runs no code it is sent.

One server per user, device and installation: its address (`address`) is an abstract Unix socket
named by the uid and a fingerprint of what its import depends on (the interpreter, the package's
files, the environment variables torch, Triton, CUDA, Python and kbv3 read). A change of any of
them names a new server; the old one exits after `KBV3_ZYGOTE_IDLE_S` (600 s) without a caller.

Why an abstract socket, by construction rather than by a check: a solution process runs in a
network namespace of its own (`sandbox`), and abstract Unix sockets belong to a network
namespace, so no solution can reach the server, bind its name or stand in for it. Where the
sandbox cannot make a network namespace the server is not used. Each side checks the other's uid
(SO_PEERCRED): another user's process can neither ask for a zygote nor pose as the server.

`KBV3_ZYGOTE_SERVER=0` turns it off: every `kbv3 eval` then starts a zygote of its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from ..process_tree import alive
from .zygote import PR_SET_CHILD_SUBREAPER, SECRET_WORDS, SPAWN_ENV, Zygote, _prctl, import_warm, serve, zygote_env

SERVER_ENV = "KBV3_ZYGOTE_SERVER"  # "0" (or false/no/off): no warm server
IDLE_ENV = "KBV3_ZYGOTE_IDLE_S"
IDLE_S = 600.0
READY_WAIT_S = 300.0  # a server launched now: its import of torch, on a slow disk
REQUEST_WAIT_S = 10.0
MAX_FDS = 3  # a request may send the caller's stdin, stdout and stderr
SERVER_MODULE = "kernelbench_v3.evaluate.solution.zygote_server"  # the server's program (`python -m`); `cli.served` adds `kbv3 eval` to it
_READ_AT_IMPORT = ("PYTHON", "TORCH", "PYTORCH", "TRITON", "CUDA", "NVIDIA", "LD_", "KBV3_", "OMP_", "MKL_")
_PACKAGE = Path(__file__).resolve().parents[2]  # the folder holding kernelbench_v3


_own_netns: bool | None = None  # whether solutions get a network namespace here: probed once a process


def wanted() -> bool:
    """Whether `kbv3 eval` should use a warm server: Linux, not turned off, and solutions get a
    network namespace of their own (else one could reach the server's abstract socket). The
    sandbox's probe forks, so a process makes it once (a batch worker asks per cold baseline)."""
    global _own_netns
    if not sys.platform.startswith("linux"):
        return False
    if not enabled():
        return False
    if _own_netns is None:
        from . import sandbox

        _own_netns = sandbox.available().network == "netns"
    return _own_netns


def fingerprint(device: str, env: dict[str, str]) -> str:
    """What a server's import depends on, hashed: a server serves only callers it matches."""
    files = sorted(
        (str(p.relative_to(_PACKAGE)), p.stat().st_size, p.stat().st_mtime_ns)
        for p in (_PACKAGE / "kernelbench_v3").rglob("*.py")
    )
    read = sorted(
        (k, v)
        for k, v in env.items()
        if k.startswith(_READ_AT_IMPORT) and k not in SPAWN_ENV and k != "KBV3_PARENT_PID"
    )
    blob = json.dumps([sys.executable, sys.version, device, str(_PACKAGE), files, read])
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def enabled() -> bool:
    """Whether the environment leaves the warm server on (`KBV3_ZYGOTE_SERVER`)."""
    return os.environ.get(SERVER_ENV, "").strip().lower() not in ("0", "false", "no", "off")


def connect(device: str) -> socket.socket | None:
    """A connection to this user's warm server for `device` and this process's environment, or
    None where none listens (or the name is held by another user's process)."""
    return connect_to(address(device, zygote_env(device)))


def connect_to(name: str) -> socket.socket | None:
    """A connection to the server listening on the abstract socket `name` (a warm server, the
    baseline server), or None where none listens or another user's process holds the name."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(name)
        if peer_credentials(sock)[1] == os.getuid():
            return sock
    except OSError:
        pass
    sock.close()
    return None


def address(device: str, env: dict[str, str]) -> str:
    """The server's abstract socket name for this user, device and environment."""
    return f"\0kbv3-zygote-{os.getuid()}-{device}-{fingerprint(device, env)}"


def peer_credentials(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of a Unix socket."""
    pid, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return pid, uid


# --- the server process ---------------------------------------------------------------------


def _become_zygote(conn: socket.socket, request: dict[str, Any], fds: list[int], import_s: float) -> NoReturn:
    """In the forked child: the caller's zygote from here on. Never returns."""
    for fd in fds:  # a zygote request sends none
        os.close(fd)
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # its solution processes are waited for
        os.setsid()
        os.environ.clear()
        os.environ.update(request["env"])
        try:
            os.chdir(request["cwd"])
        except OSError:
            pass
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        from ..lifetime import die_with_process
        from .zygote import kill_solution_processes

        die_with_process(int(request["pid"]), last_words=kill_solution_processes)
        serve(conn, {"kind": "zygote_ready", "pid": os.getpid(), "import_s": import_s, "served": True})
    finally:
        os._exit(3)


def _read_request(conn: socket.socket, kinds: Iterable[str]) -> tuple[dict[str, Any], list[int]]:
    """The caller's request and the file descriptors sent with it, from a process of this user
    whose pid it names (else ValueError)."""
    pid, uid = peer_credentials(conn)
    if uid != os.getuid():
        raise ValueError(f"a process of uid {uid} asked")
    conn.settimeout(REQUEST_WAIT_S)
    data, fds, _, _ = socket.recv_fds(conn, 1 << 20, MAX_FDS)
    conn.settimeout(None)
    try:
        request = json.loads(data)
        if request.get("kind") not in kinds or int(request.get("pid", -1)) != pid:
            raise ValueError(f"not a request this server serves ({', '.join(kinds)}) from the process that sent it")
        if not isinstance(request.get("env"), dict) or not isinstance(request.get("cwd"), str):
            raise ValueError("a request without its env and cwd")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return request, fds


# What a served request becomes, in the server's forked child: (conn, request, fds, import_s).
Handler = Callable[[socket.socket, dict[str, Any], list[int], float], NoReturn]


def server_main(
    name: str,
    idle_s: float,
    handlers: Mapping[str, Handler] | None = None,
    *,
    warm: Callable[[], None] = import_warm,
    zygotes: bool = True,
) -> None:
    """Import once (`warm`), then fork a child per caller until `idle_s` pass without one: a
    zygote (`kind` "zygote", unless `zygotes` is False), or what another of `handlers` makes of
    its request. The baseline server (`supervisor.reference.baseline_server`) is this loop with
    torch.compile's imports and no zygotes."""
    kinds: dict[str, Handler] = {"zygote": _become_zygote} if zygotes else {}
    kinds.update(handlers or {})
    started = time.monotonic()
    warm()
    import_s = time.monotonic() - started
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        listener.bind(name)
    except OSError:  # another server took the name first: callers use that one
        os._exit(0)
    listener.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the zygotes it forks are reaped by the kernel
    listener.settimeout(idle_s)
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            break
        try:
            request, fds = _read_request(conn, kinds)
        except (ValueError, OSError, KeyError, TypeError) as exc:
            print(f"kbv3 zygote server: refused a caller: {exc}", flush=True)
            conn.close()
            continue
        if os.fork() == 0:
            listener.close()
            kinds[request["kind"]](conn, request, fds, import_s)
        conn.close()
        for fd in fds:
            os.close(fd)
    os._exit(0)


def leave(conn: socket.socket, last_words: dict[str, Any], code: int) -> NoReturn:
    """End a served child (a handler's forked process): flush its stdout and stderr, send
    `last_words` to its caller (who cannot wait for its exit status: it is the server's child),
    and exit with `code`."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    try:
        conn.send(json.dumps(last_words).encode())
    except OSError:
        pass
    os._exit(code)


# --- the caller's handle --------------------------------------------------------------------


class _Forked:
    """The part of `subprocess.Popen` a zygote handle uses, for a zygote this process did not start."""

    def __init__(self, pid: int):
        self.pid = pid

    def poll(self) -> int | None:
        return None if alive(self.pid) else 0

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"zygote {self.pid}", timeout or 0.0)
            time.sleep(0.01)
        return 0


class ServedZygote(Zygote):
    """A zygote handle whose zygote the warm server forks (launching the server if none is
    listening). Where the server cannot be reached it starts a zygote of its own, as `Zygote`."""

    def __init__(
        self, device: str, log_path: Path, env: dict[str, str] | None = None, server_module: str = SERVER_MODULE
    ):
        self.device, self.log_path, self.served = device, log_path, True
        self._env = zygote_env(device, env)
        self._address = address(device, self._env)
        self.launched_at = time.monotonic()
        self.ready: dict[str, Any] | None = None
        self.server_pid: int | None = None
        self.proc: Any = None
        self._launched: subprocess.Popen | None = None
        self._asked = False
        self.ctl = self._connect()
        if self.ctl is not None:
            try:
                self._ask()
            except OSError:  # the server went away between the two: launch another
                self.ctl.close()
                self.ctl = None
        if self.ctl is None:  # none yet: its import runs beside the caller's start from now
            self._launched = launch_server(self._address, device, self._env, server_module)

    def _connect(self) -> socket.socket | None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            sock.connect(self._address)
        except (ConnectionRefusedError, FileNotFoundError):
            sock.close()
            return None
        pid, uid = peer_credentials(sock)
        if uid != os.getuid():  # cannot happen by the name's uid unless another user squats it
            sock.close()
            raise PermissionError(f"the warm zygote server's name is held by uid {uid}")
        self.server_pid = pid
        return sock

    def wait_ready(self, timeout_s: float = READY_WAIT_S) -> dict[str, Any]:
        if self.ready is not None or not self.served:
            return super().wait_ready(timeout_s)
        deadline = time.monotonic() + timeout_s
        while self.ctl is None:
            exited = self._launched is not None and self._launched.poll() is not None
            if time.monotonic() > deadline:
                raise TimeoutError(f"the warm zygote server did not listen within {timeout_s:.0f} s")
            time.sleep(0.02)
            self.ctl = self._connect()
            if self.ctl is None and exited:  # it failed (its log says why), or lost the name to one now gone
                return self._own_zygote(timeout_s)
        try:
            if not self._asked:
                self._ask()
            self.ready = self._receive(max(1.0, deadline - time.monotonic()))
        except (OSError, RuntimeError, TimeoutError):  # the server went away meanwhile
            self.ctl.close()
            return self._own_zygote(timeout_s)
        self.proc = _Forked(int(self.ready["pid"]))
        return self.ready

    def _ask(self) -> None:
        """Ask the server for this caller's zygote as soon as connected: the server reads a
        request for REQUEST_WAIT_S only, and a request kept back until the solution phase came
        after a cold baseline or a large reference, when the server had dropped the connection,
        and the caller then imported a zygote of its own (8.7-11 s on the H100, issue 42). The
        fork is ready long before it is needed; its reply waits in the socket."""
        request = {"kind": "zygote", "pid": os.getpid(), "env": self._env, "cwd": os.getcwd()}
        assert self.ctl is not None
        self.ctl.send(json.dumps(request).encode())
        self._asked = True

    def _own_zygote(self, timeout_s: float) -> dict[str, Any]:
        self.served = False
        Zygote.__init__(self, self.device, self.log_path)
        return super().wait_ready(timeout_s)

    def close(self) -> None:
        if self.proc is not None:
            super().close()
        elif self.ctl is not None:  # connected, never asked: the server stays as it was
            self.ctl.close()


def launch_server(name: str, device: str, env: dict[str, str], server_module: str) -> subprocess.Popen:
    """Start a server (`python -m server_module NAME IDLE_S`) detached from this process (its own
    session, no parent-death signal)."""
    server_env = {k: v for k, v in env.items() if not any(w in k.upper() for w in SECRET_WORDS)}
    idle_s = os.environ.get(IDLE_ENV, str(IDLE_S))
    log = Path(tempfile.gettempdir()) / f"kbv3-zygote-server-{os.getuid()}-{device}.log"
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", server_module, name.lstrip("\0"), idle_s],
            env=server_env,
            cwd=str(_PACKAGE),  # sys.path[0]: the package's folder, never the first caller's
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


if __name__ == "__main__":
    server_main("\0" + sys.argv[1], float(sys.argv[2]))
