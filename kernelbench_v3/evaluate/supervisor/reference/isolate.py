"""Reference-only child processes (the baseline) with a wall-clock limit and a bounded log.

A child is `python -m kernelbench_v3.evaluate.supervisor.reference.child ROLE DIR` in its own session (process
group), so a timeout kills it and everything it spawned; where the baseline server serves
(`baseline_server`), the same child forked by it, which skips the interpreter's start and the
imports (the server's own session and lifetime rules are in its module). Its stdout and stderr are drained by a
thread that keeps only the last `max_log_bytes` and kills the child when it writes more than
`flood_bytes` in total. The result is the JSON file the child writes into DIR, a private
folder the parent made. No solution code runs in these children. The child learns the parent's pid (KBV3_PARENT_PID) and exits when this process dies, also by
SIGKILL (see `child.die_with_parent`). A crash, hang, `sys.exit`, signal or output flood becomes a `ChildOutcome` with a reason; this
module never raises for what a child does.

A caller that runs the child in a thread of its own steers it with two events: `stop` kills it
(the outcome says `stopped`), and while `pause_limit` is set its time limit does not run (the
caller holds what the child waits for, the baseline's timing lock, so that wait is not the
child's slowness). Run from a thread, the child's parent-death signal follows that thread, which
lives until the child is reaped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import baseline_server

FLOOD_BYTES = 32 << 20  # a child writing more than this to stdout/stderr is killed
SERVER_WAIT_S = 120.0  # for a baseline server launched now: its imports, on a slow disk


@dataclass
class ChildOutcome:
    result: dict[str, Any] | None
    returncode: int | None
    timed_out: bool
    flooded: bool
    log_tail: str
    wall_s: float
    started_at: float | None = None  # time.monotonic() just before the child was launched
    stopped: bool = False  # killed because its caller asked (`run_child`'s `stop`), not for what it did

    @property
    def reason(self) -> str:
        """Why there is no usable result ("" when there is one)."""
        if self.stopped:
            return f"stopped by its caller after {self.wall_s:.0f} s (process group killed)"
        if self.timed_out:
            return f"timed out after {self.wall_s:.0f} s (process group killed)"
        if self.flooded:
            return f"wrote more than {FLOOD_BYTES >> 20} MiB to stdout/stderr (killed)"
        if self.result is None:
            code = self.returncode
            if code is not None and code < 0:
                try:
                    name = signal.Signals(-code).name
                except ValueError:
                    name = str(-code)
                return f"the process died from signal {name} before writing a result"
            return f"the process exited with code {code} before writing a result"
        return ""


def _drain(stream, tail: deque, limit: int, total: list[int], flood: int, on_flood) -> None:
    size = 0
    for chunk in iter(lambda: stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536), b""):
        total[0] += len(chunk)
        tail.append(chunk)
        size += len(chunk)
        while size - len(tail[0]) >= limit and len(tail) > 1:
            size -= len(tail.popleft())
        if total[0] > flood:
            on_flood()
            break
    try:
        stream.close()
    except OSError:
        pass


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass


PACKAGE_PARENT = Path(__file__).resolve().parents[3]  # the folder it named before the move into reference/
POLL_S = 0.05  # how often a steered child's events are looked at


def _wait(
    proc: subprocess.Popen, timeout_s: float, stop: threading.Event | None, pause_limit: threading.Event | None
) -> str:
    """Wait for `proc`: "exited", "timed_out" or "stopped". The limit runs only while
    `pause_limit` is clear: it ends `timeout_s` after the last moment it was seen set."""
    deadline = time.monotonic() + timeout_s
    while True:
        if stop is not None and stop.is_set():
            return "stopped"
        now = time.monotonic()
        if pause_limit is not None and pause_limit.is_set():
            deadline = max(deadline, now + timeout_s)
        if now >= deadline:
            return "timed_out"
        try:
            proc.wait(timeout=min(POLL_S, deadline - now))
            return "exited"
        except subprocess.TimeoutExpired:
            continue


def run_child(
    role: str,
    workdir: Path,
    spec: Mapping[str, Any],
    *,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    max_log_bytes: int = 64_000,
    flood_bytes: int = FLOOD_BYTES,
    stop: threading.Event | None = None,
    pause_limit: threading.Event | None = None,
) -> ChildOutcome:
    """Run one child role on `spec` in `workdir`; never raises for the child's behaviour.
    `stop` and `pause_limit`: see the module docstring."""
    workdir = Path(workdir)
    (workdir / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    result_path = workdir / f"result_{role}.json"
    result_path.unlink(missing_ok=True)
    child_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {}), "KBV3_PARENT_PID": str(os.getpid())}
    # The child must import this same kernelbench_v3, also when it is used from a checkout
    # that is not installed (a script run from the checkout with the package on sys.path).
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_PARENT), child_env.get("PYTHONPATH", "")) if p)
    started = time.monotonic()
    proc: Any = None
    if baseline_server.wanted():  # a fork of a process that has made the child's imports
        proc = baseline_server.start(role, workdir, child_env, wait_s=min(timeout_s, SERVER_WAIT_S))
    if proc is None:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kernelbench_v3.evaluate.supervisor.reference.child", role, str(workdir)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=str(workdir),
            env=child_env,
            start_new_session=True,
        )
    tail: deque = deque()
    total = [0]
    flooded = threading.Event()

    def on_flood() -> None:
        flooded.set()
        _kill_group(proc)

    reader = threading.Thread(
        target=_drain, args=(proc.stdout, tail, max_log_bytes, total, flood_bytes, on_flood), daemon=True
    )
    reader.start()
    ended = _wait(proc, timeout_s, stop, pause_limit)
    timed_out, stopped = ended == "timed_out", ended == "stopped"
    # The whole group goes, also when the child itself exited but left processes behind.
    _kill_group(proc)
    proc.wait()
    reader.join(timeout=5)
    wall = time.monotonic() - started
    log = b"".join(tail)[-max_log_bytes:].decode("utf-8", "replace")
    result = None
    if ended == "exited" and not flooded.is_set() and result_path.is_file():
        try:
            result = json.loads(result_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            result = None
    return ChildOutcome(result, proc.returncode, timed_out, flooded.is_set(), log, wall, started, stopped)
