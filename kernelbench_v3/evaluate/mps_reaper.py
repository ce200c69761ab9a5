"""Ending one private MPS daemon (`mps.daemon`), and the reaper that does it once the kbv3 process
that started the daemon is gone, however it went (exit, Ctrl-C, kill -9).

The reaper is this file run as a script (`python -I mps_reaper.py ROOT OWNER_PID`), a separate,
detached process: standard library only, so it starts in tens of milliseconds and imports
nothing of the package (`mps` imports `end_daemon` from here, never the other way). It blocks
reading its stdin, a pipe whose write end only the owner (and what the owner forked) holds: end
of file means every holder is gone. Then `end_daemon`: ask the daemon to quit, which it does once
its last client has exited, kill what is left after a grace period, remove ROOT.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

PIPE_ENV, LOG_ENV = "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"
CONTROL = "nvidia-cuda-mps-control"
GRACE_S = 10.0  # a daemon whose clients have all exited quits well within this


def daemon_pids(pipe: Path) -> list[int]:
    """The processes serving the daemon of `pipe` (the control daemon and its server): those whose
    environment names that pipe folder. Only this user's processes can be read."""
    needle = f"{PIPE_ENV}={pipe}".encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes() + b"\0"
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in environ and b"mps" in cmdline and b"mps_reaper" not in cmdline:
            found.append(int(entry.name))
    return found


def end_daemon(root: Path, grace_s: float = GRACE_S) -> None:
    """Ask the daemon under `root` to quit, kill what is left of it after `grace_s`, remove `root`.
    Safe on a daemon that is already gone."""
    pipe = root / "pipe"
    env = {**os.environ, PIPE_ENV: str(pipe), LOG_ENV: str(root / "log")}
    if (pipe / "control").exists() and shutil.which(CONTROL, path=env.get("PATH")):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run([CONTROL], input=b"quit\n", env=env, capture_output=True, timeout=grace_s)
    deadline = time.monotonic() + grace_s
    while daemon_pids(pipe) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in daemon_pids(pipe):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(root, ignore_errors=True)


def main(root: Path) -> None:
    while sys.stdin.buffer.read(65536):  # until every holder of the write end is gone
        pass
    end_daemon(root)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
