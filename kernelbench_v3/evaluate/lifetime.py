"""A process that must not outlive the one that started it: the evaluator's reference-only children
(`supervisor.reference.child`) and the zygote (`solution.zygote`) both call `die_with_parent` first thing;
a zygote forked by the warm server (`solution.zygote_server`) calls `die_with_process`.

Such a process runs in its own session, so a SIGKILL of its parent (a batch killed midway) would
otherwise leave it running. On Linux the kernel kills it (PR_SET_PDEATHSIG); everywhere, a watch
thread kills its process group once the parent pid changes. A process with `last_words` (the
zygote: end every process a solution left, detached ones included, which its death would hand
on to init) gets SIGTERM from the kernel instead, and both ways run them before the kill.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable

PARENT_PID_ENV = "KBV3_PARENT_PID"  # set by isolate.run_child: the pid the child must not outlive
PR_SET_PDEATHSIG = 1


def _set_parent_death_signal(sig: signal.Signals) -> bool:
    """Ask the Linux kernel to send `sig` to this process when its parent exits (False elsewhere)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _kill_own_group(last_words: Callable[[], object] | None = None) -> None:
    try:
        if last_words is not None:
            last_words()
    finally:
        try:
            os.killpg(os.getpgrp(), signal.SIGKILL)
        finally:
            os._exit(1)


def _watch_parent(parent_pid: int, interval_s: float, last_words: Callable[[], object] | None) -> None:
    while True:
        if os.getppid() != parent_pid:  # reparented: the parent is gone
            _kill_own_group(last_words)
        time.sleep(interval_s)


def die_with_parent(
    parent_pid: int | None, interval_s: float = 0.5, last_words: Callable[[], object] | None = None
) -> None:
    """Make this process (and, through the watch thread, its process group) exit when
    `parent_pid` dies, after `last_words` if given. Called first thing, before any problem or
    solution code runs; with `last_words`, from the main thread (it sets a signal handler)."""
    if not parent_pid:
        return
    if last_words is None:
        _set_parent_death_signal(signal.SIGKILL)
    else:
        signal.signal(signal.SIGTERM, lambda *_: _kill_own_group(last_words))
        _set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != parent_pid:  # the parent died before the death signal was armed
        _kill_own_group(last_words)
    watch = threading.Thread(
        target=_watch_parent, args=(parent_pid, interval_s, last_words), daemon=True, name="kbv3-parent-watch"
    )
    watch.start()


def _watch_process(pid: int, interval_s: float, last_words: Callable[[], object] | None) -> None:
    try:
        fd = os.pidfd_open(pid)  # Linux 5.3+: readable once the process has exited, whoever its parent
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        import select

        select.select([fd], [], [])
        _kill_own_group(last_words)
    while True:
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):  # gone, or its pid now another user's
            _kill_own_group(last_words)
        time.sleep(interval_s)


def die_with_process(pid: int, interval_s: float = 0.5, last_words: Callable[[], object] | None = None) -> None:
    """`die_with_parent` for a process that is not this one's parent (a zygote forked by the warm
    server, `solution.zygote_server`, lives for the `kbv3 eval` that asked for it): a watch
    thread kills this process group, after `last_words` if given, once `pid` has exited."""
    if os.getpgrp() != os.getpid():
        raise RuntimeError("die_with_process kills its own process group: lead one first (os.setsid)")
    watch = threading.Thread(
        target=_watch_process, args=(pid, interval_s, last_words), daemon=True, name="kbv3-owner-watch"
    )
    watch.start()
