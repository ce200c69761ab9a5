#!/usr/bin/env python3
"""A stand-in for `nvidia-cuda-mps-control` (tests only): `-d` forks a daemon that makes the
control pipe (a FIFO) in CUDA_MPS_PIPE_DIRECTORY and serves it until told `quit`; without `-d`
it passes its stdin's lines to a running daemon. Like the real one, `quit` waits for the
daemon's "clients": processes named in CLIENTS_FILE (one pid a line) that are still alive."""

import os
import sys
import time
from pathlib import Path

pipe = Path(os.environ["CUDA_MPS_PIPE_DIRECTORY"])
control = pipe / "control"


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def clients():
    path = pipe / "clients"
    pids = [int(x) for x in path.read_text().split()] if path.exists() else []
    return [p for p in pids if alive(p)]


def serve():
    os.mkfifo(control)
    while True:
        with open(control) as f:
            for line in f:
                if line.strip() == "quit":
                    while clients():
                        time.sleep(0.05)
                    control.unlink()
                    return


if sys.argv[1:] == ["-d"]:
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            sys.stdin.close()
            serve()
            os._exit(0)
        os._exit(0)
    while not control.exists():
        time.sleep(0.01)
    sys.exit(0)
if not control.exists():
    sys.exit(1)
with open(control, "w") as f:
    f.write(sys.stdin.read())
