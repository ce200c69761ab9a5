"""Whether a timing lock (`baseline_child.timing_lock`) is free to another holder right now."""

from __future__ import annotations

import fcntl


def lock_free(path) -> bool:
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
        return True
