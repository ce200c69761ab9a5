"""`kbv3 eval` run by the warm server: the supervisor's import of torch paid once for many runs.

A `kbv3 eval` spends seconds importing torch and the evaluator before it can do anything (1.2 s
on a 2-core CPU, 3.1 s on the H200: `supervisor_import`). The warm zygote server
(`evaluate.solution.zygote_server`) has done that import once, CUDA-free; launched as the program
`warm_server`, it also serves whole `kbv3 eval` runs. The program `kbv3` then stays a thin client
(`run_served`): it sends its arguments, environment, working folder, start time and its stdin,
stdout and stderr (as file descriptors) to the server, which forks a child that becomes that
`kbv3 eval` (`warm_server.become_cli`): it runs `main.main` as the program would, writing to the
caller's own terminal or pipes, and sends back the exit status, which the client exits with.

What stays as it was:
- the first `kbv3 eval` of an installation, device and environment runs in its own process (no
  server listens yet) and launches the server for the later ones;
- the child is trusted code as the CLI is, from the same files (the server's name fingerprints
  them): the server runs only `kbv3 eval`, no code it is sent; it is reachable only by processes
  of the same user outside the sandbox (see the server's docstring);
- the client forwards SIGINT, SIGTERM and SIGHUP to the child (Ctrl-C reads `interrupted`, 130);
  a client killed outright takes the child with it (`lifetime.die_with_process`), and the child
  takes its zygote and MPS daemon as a killed CLI does;
- everything else runs in the caller's process as before: another verb, `--server`, `--help`, a
  profiler or tracer attached, `KBV3_ZYGOTE_SERVER=0`, a missing stdio descriptor, a terminal
  that stops background writers (`tostop`), or no server that answers.

The record's `wall_phase_s` names the hand-over `served_start` (from the request to `main`).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from typing import Any

from .. import evaluate

SERVER_MODULE = "kernelbench_v3.cli.warm_server"  # what `ServedZygote` launches: it serves `kbv3 eval` too
STARTED_WAIT_S = 10.0  # the server's answer that the child runs
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
NO_STATUS = 1  # the child ended without sending its status (killed): the work did not finish


def wanted(argv: list[str]) -> bool:
    """Whether this `kbv3` invocation should be served (the module docstring's conditions)."""
    if not argv or argv[0] != "eval" or any(a in ("-h", "--help") or a.startswith("--server") for a in argv[1:]):
        return False
    if not sys.platform.startswith("linux"):
        return False
    if not evaluate.warm_server_enabled():
        return False
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return False
    return all(_usable(fd) for fd in (0, 1, 2))


def _usable(fd: int) -> bool:
    """`fd` is open and, where it is a terminal, lets a background process write to it."""
    try:
        os.fstat(fd)
    except OSError:
        return False
    if not os.isatty(fd):
        return True
    try:
        import termios

        return not termios.tcgetattr(fd)[3] & termios.TOSTOP
    except (ImportError, OSError):
        return False


def device_of(argv: list[str]) -> str:
    """The device named by `--device`, else the one `kbv3 eval` would pick, guessed without
    importing torch: the server's device only decides its import's environment, and the child
    asks torch itself."""
    for i, arg in enumerate(argv):
        if arg == "--device" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--device="):
            return arg.split("=", 1)[1]
    return "cuda" if os.path.exists("/dev/nvidiactl") else "cpu"


def run_served(argv: list[str], started: float) -> int | None:
    """Run `kbv3 argv` in a child of the warm server and return its exit status; None when no
    server took it (nothing of it has run: the caller runs it itself)."""
    device = device_of(argv)
    ignored = [int(sig) for sig in FORWARDED if signal.getsignal(sig) == signal.SIG_IGN]  # a background job's
    sock = evaluate.warm_server_connect(device)
    if sock is None:
        return None
    try:
        request = {
            "kind": "cli",
            "pid": os.getpid(),
            "env": dict(os.environ),
            "cwd": os.getcwd(),
            "argv": argv,
            "started": started,
            "asked_at": time.monotonic(),
            "ignored": ignored,
        }
        socket.send_fds(sock, [json.dumps(request).encode()], [0, 1, 2])
        sock.settimeout(STARTED_WAIT_S)
        child = int(json.loads(sock.recv(1 << 16))["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        sock.close()
        return None
    sock.settimeout(None)
    forwarded: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        forwarded.append(signum)
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for sig in FORWARDED:
        if int(sig) not in ignored:
            signal.signal(sig, forward)
    try:
        status = sock.recv(1 << 16)
    except OSError:
        status = b""
    if status:
        return int(json.loads(status)["exit"])
    if forwarded and forwarded[-1] != signal.SIGINT:  # it died of the SIGTERM or SIGHUP: so does this process
        signal.signal(forwarded[-1], signal.SIG_DFL)
        os.kill(os.getpid(), forwarded[-1])
    print("kbv3 eval: the evaluation ended without an exit status (its process was killed)", file=sys.stderr)
    return NO_STATUS
