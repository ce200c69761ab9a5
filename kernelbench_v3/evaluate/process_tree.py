"""A process's descendants, and how to end them all: stopped first, until no new one appears,
then killed.

Used where untrusted processes must not outlive the work they were started for: the zygote's
reap (`solution.zygote`: everything a solution process left) and a batch's parent when it kills
a worker (`batch.executors`: the worker, its zygote and whatever the solution spawned, detached
processes in their own sessions included, before a dying zygote could hand them on to init).

Stopping comes first because a running process can fork between the walk that finds it and the
signal that kills it, and a child forked then would be handed on to init when its parent dies.
A stopped process forks nothing, so once a walk finds no process that is not already stopped,
the set is whole and every member can be killed.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable


def _children_map() -> dict[int, list[int]]:
    """Each live (non-zombie) process's children, from one pass over /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def descendants(root: int) -> list[int]:
    """Live (non-zombie) processes below `root`."""
    children, found, stack = _children_map(), [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie has exited; only its reaping is left)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _signal(pids: Iterable[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _stop_all_below(root: int, walks: int) -> set[int]:
    """Stop every process below `root`, walking again until a walk finds none not yet stopped
    (stopped, they fork no more), at most `walks` times; the stopped."""
    stopped: set[int] = set()
    for _ in range(walks):
        new = set(descendants(root)) - stopped
        if not new:
            break
        _signal(new, signal.SIGSTOP)
        stopped |= new
    return stopped


def kill_descendants(
    root: int,
    *,
    stop_root: bool = False,
    reap: Callable[[], None] | None = None,
    rounds: int = 100,
) -> int:
    """Stop every process below `root` until a walk finds none not yet stopped, kill them all,
    and repeat until none is left; returns how many were killed. `stop_root` stops `root` first,
    so it starts no new child meanwhile (the caller kills it). `reap` collects the killed
    children when the caller is their parent or subreaper (a zombie is never counted as live)."""
    if stop_root:
        _signal([root], signal.SIGSTOP)
    killed: set[int] = set()
    for _ in range(rounds):
        stopped = _stop_all_below(root, rounds)
        if not stopped:
            break
        _signal(stopped, signal.SIGKILL)
        killed |= stopped
        if reap is not None:
            reap()
        time.sleep(0.005)
    if reap is not None:
        reap()
    return len(killed)


__all__ = ["alive", "descendants", "kill_descendants"]
