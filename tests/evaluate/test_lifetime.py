"""A process that must not outlive its owner (`evaluate.lifetime`): it dies with its parent or
with a watched process, and one with last words (the zygote's: end what a solution detached)
runs them first, so a process detached below it dies too instead of being handed on to init."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelbench_v3.evaluate.process_tree import alive

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc, uses prctl")

# The owned process: a subreaper (as the zygote is) holding a process detached into a session of
# its own; its pid and the detached one's are written to argv[1] once both exist.
OWNED = r"""
import ctypes, os, sys, time
from kernelbench_v3.evaluate.lifetime import die_with_parent, die_with_process
from kernelbench_v3.evaluate.process_tree import descendants, kill_descendants
mode, out, owner = sys.argv[2], sys.argv[1], int(sys.argv[3])
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
last_words = (lambda: kill_descendants(os.getpid())) if mode.endswith("last_words") else None
if mode.startswith("process"):  # started as a session's leader, as a served zygote is
    die_with_process(owner, interval_s=0.05, last_words=last_words)
else:
    die_with_parent(owner, interval_s=0.05, last_words=last_words)
ready_r, ready_w = os.pipe()
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        os.write(ready_w, str(os.getpid()).encode())
        time.sleep(600)
    os._exit(0)
detached = int(os.read(ready_r, 32))
while descendants(os.getpid()) != [detached]:  # the middle process has exited (a zombie is not counted)
    time.sleep(0.01)
open(out + ".tmp", "w").write(f"{os.getpid()} {detached}")
os.rename(out + ".tmp", out)
time.sleep(600)
"""

# The owner: starts the owned process (as its parent, in a session of its own, as the zygote is
# started: its death kills its own process group) and waits.
OWNER = r"""
import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[3], str(os.getpid())], start_new_session=True)
time.sleep(600)
"""


def _pids(path: Path, within_s: float = 60.0) -> tuple[int, int]:
    deadline = time.monotonic() + within_s
    while not path.exists():
        assert time.monotonic() < deadline, "the owned process never said it was ready"
        time.sleep(0.02)
    owned, detached = (int(x) for x in path.read_text().split())
    return owned, detached


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not alive(pid)


def _end(*pids: int) -> None:
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def _start(mode: str, out: Path) -> tuple[subprocess.Popen, subprocess.Popen | None]:
    """The owner, and the owned process where the test starts it itself (one that watches a
    process that is not its parent: started in a session of its own, as a served zygote is)."""
    if mode.startswith("process"):
        watched = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        owned = subprocess.Popen(
            [sys.executable, "-c", OWNED, str(out), mode, str(watched.pid)], start_new_session=True
        )
        return watched, owned
    return subprocess.Popen([sys.executable, "-c", OWNER, OWNED, str(out), mode]), None


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "detached_dies"), [("parent_last_words", True), ("process_last_words", True), ("parent", False)]
)
def test_a_process_dies_with_its_owner_after_its_last_words(tmp_path, mode, detached_dies):
    out = tmp_path / "pids"
    owner, started_here = _start(mode, out)
    owned = detached = 0
    try:
        owned, detached = _pids(out)
        owner.kill()
        owner.wait()
        assert _gone(owned), "the owned process outlived its owner"
        # Without last words the kernel's SIGKILL hands the detached process on to init: why the
        # zygote has them.
        assert _gone(detached, 10.0 if detached_dies else 1.0) == detached_dies
    finally:
        owner.kill()
        _end(owned, detached)
        if started_here is not None:
            started_here.wait()
