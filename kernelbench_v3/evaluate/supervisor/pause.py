"""Stopping the solution's side between timed windows: every process the zygote forked, and
everything those processes started, however they left their session or process group.

Between a window's reply and the next request nothing of the solution may run on the host: the
supervisor is writing the next window's inputs then, and a thread, a forked helper or a
double-forked daemon that computed on them would do its work off the clock. The zygote is a
child subreaper, so everything a solution process starts stays in the zygote's tree (orphans are
re-parented to it); `ProcessPause.stop` walks that tree through /proc and stops every process in
it but the zygote, until a walk finds nothing new (a stopped process cannot fork), and
`resume(pid)` continues one member and what it started; an orphan stays stopped until the
zygote's reap kills it. One zygote serves one evaluation at a time (its `reap` already assumes
so), so the tree holds nothing of anybody else's. Linux only: elsewhere there is no /proc to walk and
only the given process groups are stopped.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from pathlib import Path

PROC = Path("/proc")
MAX_PROCESSES = 256  # below the zygote; more is a fork bomb, and every walk would crawl through it


class TooManyProcesses(Exception):
    """The solution's side holds more processes than MAX_PROCESSES (all of them are stopped)."""


def children(pid: int) -> set[int]:
    """The direct children of `pid`, from every one of its threads (a thread that forks is the
    child's parent); empty when the process is gone."""
    found: set[int] = set()
    try:
        tasks = list((PROC / str(pid) / "task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            found.update(int(c) for c in (task / "children").read_text().split())
        except (OSError, ValueError):
            pass
    return found


def tree(root: int) -> dict[int, int]:
    """Every process below `root` in the process tree, each with its parent."""
    parents: dict[int, int] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        for child in children(pid):
            if child not in parents and child != root:
                parents[child] = pid
                todo.append(child)
    return parents


def descendants(root: int) -> set[int]:
    """Every process below `root` (not `root` itself)."""
    return set(tree(root))


def _signal(pid: int, sig: int, group: bool = False) -> bool:
    try:
        (os.killpg if group else os.kill)(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


class ProcessPause:
    """Stops the solution's side of one evaluation and continues it one process at a time.

    `members` are the processes the supervisor talks to (the solution process, the echo), each
    the leader of its own process group; `root` is the zygote they were forked from. `stop`
    stops every member's group and every process below the root; `resume(pid)` continues one
    member with its group and what it started, and leaves everything else stopped: a member's
    window never runs beside another member's processes, nor beside an orphan."""

    def __init__(self, root: int, members: Iterable[int] = (), max_processes: int = MAX_PROCESSES):
        self.root = root
        self.members = set(members)
        self.max_processes = max_processes
        self.stopped: dict[int, int | None] = {}  # stopped pid -> the member it belongs to (None: an orphan)
        self.walk = (PROC / str(root) / "task").is_dir()

    def add_member(self, pid: int) -> None:
        self.members.add(pid)

    def is_stopped(self, pid: int) -> bool:
        return pid in self.stopped

    def stop(self) -> None:
        for pid in self.members - self.stopped.keys():
            _signal(pid, signal.SIGSTOP, group=True)
            self.stopped[pid] = pid
        while self.walk:
            parents = tree(self.root)
            found = parents.keys() - self.stopped.keys()
            if not found:
                break
            for pid in found:  # one gone between the walk and the signal is not looked for again
                _signal(pid, signal.SIGSTOP)
                self.stopped[pid] = self._member_above(pid, parents)
        if len(self.stopped) > self.max_processes:
            raise TooManyProcesses(
                f"the solution's side holds {len(self.stopped)} processes (at most {self.max_processes})"
            )

    def resume(self, pid: int) -> None:
        """Continue member `pid`, its process group and every process it started (found when
        they were stopped, so nothing is read from /proc on the way into a window)."""
        if pid not in self.stopped:
            return
        _signal(pid, signal.SIGCONT, group=True)
        mine = [p for p, member in self.stopped.items() if member == pid]
        for p in mine:
            if p != pid:
                _signal(p, signal.SIGCONT)
            del self.stopped[p]

    def _member_above(self, pid: int, parents: dict[int, int]) -> int | None:
        while pid in parents and pid not in self.members:
            pid = parents[pid]
        return pid if pid in self.members else None
