"""Entry point of the evaluator's reference-only child processes: `python -m kernelbench_v3.evaluate.child ROLE DIR`.

Only trusted code runs here (today the `baseline` role: the reference timed eager and compiled);
solutions run in the sandboxed solution process instead (`worker`). Reads `DIR/spec.json`, runs
the role, writes `DIR/result_<ROLE>.json` atomically and leaves with `os._exit`. Nothing on stdout
is ever read as a result.

A child never outlives the evaluating process (`die_with_parent`): the child runs in its own
session, so a SIGKILL of the parent (a batch killed midway) would otherwise leave it running, a
hanging solution forever. On Linux the kernel kills it (PR_SET_PDEATHSIG); everywhere, a watch
thread kills its process group once the parent pid changes.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from ..paths import write_atomically

PARENT_PID_ENV = "KBV3_PARENT_PID"  # set by isolate.run_child: the pid the child must not outlive
PR_SET_PDEATHSIG = 1


def _set_parent_death_signal() -> bool:
    """Ask the Linux kernel to SIGKILL this process when its parent exits (False elsewhere)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _kill_own_group() -> None:
    try:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    finally:
        os._exit(1)


def _watch_parent(parent_pid: int, interval_s: float) -> None:
    while True:
        if os.getppid() != parent_pid:  # reparented: the parent is gone
            _kill_own_group()
        time.sleep(interval_s)


def die_with_parent(parent_pid: int | None, interval_s: float = 0.5) -> None:
    """Make this process (and, through the watch thread, its process group) exit when
    `parent_pid` dies. Called first thing, before any problem or solution code runs."""
    if not parent_pid:
        return
    _set_parent_death_signal()
    if os.getppid() != parent_pid:  # the parent died before the death signal was armed
        _kill_own_group()
    threading.Thread(target=_watch_parent, args=(parent_pid, interval_s), daemon=True, name="kbv3-parent-watch").start()


def _write(path: Path, payload: dict) -> None:
    write_atomically(path, json.dumps(payload, default=str))


def main(role: str, workdir: Path) -> None:
    die_with_parent(int(os.environ.get(PARENT_PID_ENV) or 0))
    spec = json.loads((workdir / "spec.json").read_text(encoding="utf-8"))
    result_path = workdir / f"result_{role}.json"
    try:
        if role == "baseline":
            from .baseline import child_main

            payload = child_main(spec, workdir)
        else:
            raise ValueError(f"unknown child role {role!r}")
        payload = {"ok": True, **payload}
    except BaseException as exc:  # report everything, including SystemExit from the problem
        payload = {
            "ok": False,
            "error": f"{type(exc).__name__}: {exc}"[:1000],
            "traceback": traceback.format_exc()[-4000:],
        }
    try:
        _write(result_path, payload)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
