"""Where an evaluation's seconds go: `phase` adds a block's wall time to `Record.phase_s`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from ..record import Record


@contextmanager
def phase(rec: Record, name: str) -> Iterator[None]:
    started = time.monotonic()
    try:
        yield
    finally:
        rec.phase_s[name] = round(rec.phase_s.get(name, 0.0) + time.monotonic() - started, 3)
