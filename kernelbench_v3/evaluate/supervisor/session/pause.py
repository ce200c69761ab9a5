"""Stopping the solution's side between timed windows: every process the zygote forked, and
everything those processes started, however they left their session or process group; and the
proof that what was stopped stayed stopped.

Between a window's reply and the next request nothing of the solution may run on the host: the
supervisor is writing the next window's inputs then, and a thread, a forked helper or a
double-forked daemon that computed on them would do its work off the clock. The zygote is a
child subreaper, so everything a solution process starts stays in the zygote's tree (orphans are
re-parented to it); `ProcessPause.stop` walks that tree through /proc and stops every process in
it but the zygote, until a walk after everything known has stopped finds nothing new (a stopped
process cannot fork).

A signal is not proof. SIGSTOP is delivered asynchronously, a tracer can cancel it, and a stopped
process can be continued behind the supervisor's back (a POSIX timer or a child's exit signal set
to SIGCONT, an orphaned process group, which the kernel continues). So `stop` waits until every
thread of every stopped process is in state `T` with `TracerPid` 0, and keeps each thread's
scheduler record (/proc/<pid>/task/<tid>/schedstat: time on a CPU and times scheduled, which any
run at all changes); every later `stop` compares them. `resume(pid)` continues only the member
itself, after checking that its main thread has not run since it was stopped; its helpers stay
stopped until the reap, because a helper resumed with it would work in the arming gap, which is
timed for the member alone. Once one stop has completed, a process that a later walk finds for
the first time was started while a member ran alone, and worked beside it: that is a violation
too (on the CPU the solution process cannot even fork by then: `solution.seccomp.forbid_forks`).
`others_still(pid)` checks every other stopped process the same way
(after arming, say). Any violation raises `NotStopped`. One zygote serves one evaluation at a
time (its `reap` already assumes so), so the tree holds nothing of anybody else's. Linux only:
elsewhere there is no /proc to walk and only the given process groups are stopped, unchecked.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable

PROC = "/proc"  # plain strings and os.read: every timed call walks it twice (pathlib was a third of a stop)
MAX_PROCESSES = 256  # below the zygote; more is a fork bomb, and every walk would crawl through it
# SIGSTOP takes effect when a thread next leaves the kernel: a thread in a driver call (state D)
# may take a while, one a tracer holds never does.
SETTLE_S = 2.0
SETTLE_POLL_S = 0.0005
RECORD_STILL_S = 0.0002  # a stopped thread leaves the CPU microseconds after it reads as stopped
_DEAD = ("Z", "X")  # a thread that exited: it runs no more


class TooManyProcesses(Exception):
    """The solution's side holds more processes than MAX_PROCESSES (all of them are stopped)."""


class NotStopped(Exception):
    """A process of the solution's side did not stop, is traced, or ran while it had to be stopped."""


def children(pid: int) -> set[int]:
    """The direct children of `pid`, from every one of its threads (a thread that forks is the
    child's parent); empty when the process is gone."""
    found: set[int] = set()
    for task in _tasks(pid):
        text = _read(f"{PROC}/{pid}/task/{task}/children")
        try:
            found.update(int(c) for c in (text or "").split())
        except ValueError:
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


def _tasks(pid: int) -> list[str]:
    try:
        return os.listdir(f"{PROC}/{pid}/task")
    except OSError:
        return []


def _read(path: str) -> str | None:
    """A /proc file's text, read to its end; None when the thread or process is gone."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


def runs(pid: int) -> dict[str, str]:
    """Each thread's scheduler record: nanoseconds on a CPU, waiting, times scheduled. Any run
    changes it; a stopped thread's never does."""
    found = {}
    for tid in _tasks(pid):
        text = _read(f"{PROC}/{pid}/task/{tid}/schedstat")
        if text is not None:
            found[tid] = text.strip()
    return found


def settled_runs(
    pid: int,
    deadline: float,
    read: Callable[[int], dict[str, str]] = runs,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, str]:
    """`runs(pid)` once it holds still. A thread shows state `T` as soon as it stops itself, a
    moment before it leaves the CPU, and the kernel adds that moment to its time on a CPU when it
    does: a record read in between changes later although the thread never ran again (an honest
    GEMM was failed so on the H200). Two reads alike, RECORD_STILL_S apart, are the record; a
    process whose record still moves at `deadline` is running, whatever its state says."""
    record = read(pid)
    while True:
        sleep(RECORD_STILL_S)
        again = read(pid)
        if again == record:
            return record
        if clock() > deadline:
            raise NotStopped(f"process {pid} still ran {SETTLE_S:g} s after SIGSTOP although it read as stopped")
        record = again


def why_running(pid: int) -> str | None:
    """Why process `pid` is not stopped for good: a live thread not in state `T` (a traced stop
    is `t`), or a tracer; None when it is stopped or gone."""
    for tid in _tasks(pid):
        status = _read(f"{PROC}/{pid}/task/{tid}/status")
        if status is None:
            continue
        state, tracer = None, None
        for line in status.splitlines():
            if line.startswith("State:"):
                state = line[6:].split()
            elif line.startswith("TracerPid:"):
                tracer = line[10:].strip()
            if state is not None and tracer is not None:  # the rest of the file says nothing more
                break
        state, tracer = state or [], "0" if tracer is None else tracer
        if tracer != "0":
            return f"thread {tid} of process {pid} is traced by process {tracer}"
        if state and state[0] not in ("T", *_DEAD):
            return f"thread {tid} of process {pid} is in state {' '.join(state)}, not stopped"
    return None


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
    stops every member's group and every process below the root and checks that all of it
    stopped; `resume(pid)` continues member `pid` alone and leaves everything else stopped: a
    member's window never runs beside another member's processes, its own helpers or an orphan."""

    def __init__(self, root: int, members: Iterable[int] = (), max_processes: int = MAX_PROCESSES):
        self.root = root
        self.members = set(members)
        self.max_processes = max_processes
        self.stopped: dict[int, int | None] = {}  # stopped pid -> the member it belongs to (None: an orphan)
        self.records: dict[int, dict[str, str]] = {}  # stopped pid -> its threads' runs once it stopped
        self.walk = os.path.isdir(f"{PROC}/{root}/task")
        self.settled = False  # one stop has completed: from then on no new process may appear

    def add_member(self, pid: int) -> None:
        self.members.add(pid)

    def is_stopped(self, pid: int) -> bool:
        return pid in self.stopped

    def stop(self) -> None:
        """Stop everything of the solution's side and prove it (else `NotStopped`)."""
        for pid in self.members - self.stopped.keys():
            _signal(pid, signal.SIGSTOP, group=True)
            self.stopped[pid] = pid
        while True:
            parents = tree(self.root) if self.walk else {}
            found = parents.keys() - self.stopped.keys()
            for pid in found:  # one gone between the walk and the signal is not looked for again
                _signal(pid, signal.SIGSTOP)
                self.stopped[pid] = self._member_above(pid, parents)
            born = sorted(pid for pid in found if pid not in self.members)
            if self.settled and born:
                # Since the first stop only a member ran, alone: a process new since then was
                # started while it ran (in the arming gap or a window) and worked beside it.
                raise NotStopped(
                    f"process {born[0]} appeared on the solution's side while a member was to run alone "
                    "(a helper started in the arming gap or a window works beside it)"
                )
            if len(self.stopped) > self.max_processes:
                raise TooManyProcesses(
                    f"the solution's side holds {len(self.stopped)} processes (at most {self.max_processes})"
                )
            if not self.walk:
                return
            self._settle()
            if not found:  # everything known is stopped, so nothing could have forked since the walk
                self.settled = True
                return

    def resume(self, pid: int, check: bool = True) -> None:
        """Continue member `pid` alone, after checking (unless `check` is False: the session is
        already lost) that it has not run since it was stopped."""
        if pid not in self.stopped:
            return
        if check and self.walk:
            self._still(pid, main_only=True)
        _signal(pid, signal.SIGCONT)
        del self.stopped[pid]
        self.records.pop(pid, None)

    def others_still(self, running: int) -> None:
        """Check that every stopped process but `running` has not run since it stopped (call it
        after `running` armed: a helper that worked in the arming gap fails here)."""
        if self.walk:
            for pid in list(self.stopped):
                if pid != running:
                    self._still(pid)

    def _settle(self) -> None:
        """Wait until every stopped process is stopped for good, untraced; keep its record, or
        check it against the record kept when it first stopped."""
        deadline = time.monotonic() + SETTLE_S
        for pid in list(self.stopped):
            while (why := why_running(pid)) is not None:
                if time.monotonic() > deadline:
                    raise NotStopped(f"not stopped {SETTLE_S:g} s after SIGSTOP: {why}")
                time.sleep(SETTLE_POLL_S)
            if pid in self.records:
                self._still(pid)
            else:
                self.records[pid] = settled_runs(pid, deadline)

    def _still(self, pid: int, main_only: bool = False) -> None:
        """`NotStopped` if `pid` ran since its record was kept. `main_only` reads its main thread
        alone: one file, cheap enough for the way into a timed call (a continued member's main
        thread is the worker's doorbell loop, which runs at once)."""
        before = self.records.get(pid)
        if before is None:
            return  # stopped by `stop` but never settled (no walk): nothing to compare
        if main_only:
            now = {str(pid): (_read(f"{PROC}/{pid}/task/{pid}/schedstat") or "").strip()}
            now = {tid: record for tid, record in now.items() if record and tid in before}
        else:
            now = runs(pid)
        moved = [tid for tid, record in now.items() if before.get(tid) != record]
        if moved:
            raise NotStopped(f"process {pid} (thread {moved[0]}) ran while the solution's side was stopped")
        if not main_only and (why := why_running(pid)) is not None:
            raise NotStopped(why)

    def _member_above(self, pid: int, parents: dict[int, int]) -> int | None:
        while pid in parents and pid not in self.members:
            pid = parents[pid]
        return pid if pid in self.members else None
