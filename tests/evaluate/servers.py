"""Warm servers (the zygote server, the baseline server) of a test's own: a name no other test
shares (a tag in the fingerprint), a short idle, and the pids the test appends killed after."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator

from kernelbench_v3.evaluate.solution import zygote_server


def own_servers(monkeypatch) -> Iterator[list[int]]:
    """For a fixture to `yield from`: the test appends its servers' pids to the list it gets."""
    monkeypatch.setenv("KBV3_TEST_SERVER_TAG", uuid.uuid4().hex)
    monkeypatch.setenv(zygote_server.IDLE_ENV, "60")
    pids: list[int] = []
    yield pids
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
