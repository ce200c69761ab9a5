"""A line while a long step runs: `kbv3 eval` (also with `--server`) and the demo say when an evaluation starts and
then every few seconds that it is still running, so a 20-50 s evaluation on a loaded CPU is
never a silent wait."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

HEARTBEAT_S = 10.0  # a progress line at least this often while an evaluation runs


def say_on_stderr(text: str) -> None:
    """A progress line on stderr, at once: stdout stays the verdict (or --json's one object)."""
    print(text, file=sys.stderr, flush=True)


@contextmanager
def heartbeat(what: str, say: Callable[[str], None], every: float | None = None) -> Iterator[None]:
    """Say that `what` is still running every `every` seconds (HEARTBEAT_S) until the block ends."""
    every = HEARTBEAT_S if every is None else every
    done = threading.Event()
    started = time.monotonic()

    def beat() -> None:
        while not done.wait(every):
            say(f"        ... {what} still running ({time.monotonic() - started:.0f} s)")

    thread = threading.Thread(target=beat, name="kbv3-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
