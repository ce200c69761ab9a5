"""Ending a process tree (`evaluate.process_tree`): every descendant stopped until no new one
appears, then killed, so a process that keeps forking, or one detached into its own session
below a subreaper, is not left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kernelbench_v3.evaluate.process_tree import alive, descendants, kill_descendants

# A subreaper (as the zygote is) with a detached grandchild in its own session and a child that
# forks a new sleeper every few milliseconds.
TREE = r"""
import ctypes, os, sys, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
if os.fork() == 0:  # a double fork into its own session
    if os.fork() == 0:
        os.setsid()
        open(sys.argv[1], "w").write(str(os.getpid()))
        time.sleep(600)
    os._exit(0)
if os.fork() == 0:  # a forker
    while True:
        if os.fork() == 0:
            time.sleep(600)
        time.sleep(0.003)
time.sleep(600)
"""


def test_a_detached_grandchild_and_a_forker_are_all_killed(tmp_path: Path):
    pid_file = tmp_path / "detached.pid"
    tree = subprocess.Popen([sys.executable, "-c", TREE, str(pid_file)])
    try:
        deadline = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text()) or len(descendants(tree.pid)) < 4:
            assert time.monotonic() < deadline, "the tree did not grow"
            time.sleep(0.02)
        detached = int(pid_file.read_text())
        assert detached in descendants(tree.pid)  # handed to the subreaper
        killed = kill_descendants(tree.pid, stop_root=True)
        assert killed >= 3
        assert descendants(tree.pid) == []
        assert not alive(detached)
    finally:
        os.kill(tree.pid, signal.SIGKILL)
        tree.wait()


def test_nothing_below_is_nothing_killed():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert kill_descendants(sleeper.pid) == 0
        assert sleeper.poll() is None  # the root itself is the caller's to end
    finally:
        sleeper.kill()
        sleeper.wait()
