"""A solution process whose worker cannot start says why to the supervisor's first request,
instead of exiting silently (the supervisor then reported only 'exited with code 0')."""

from __future__ import annotations

import os
import socket

import pytest

from kernelbench_v3.evaluate.protocol.channel import Arena, Link
from kernelbench_v3.evaluate.solution import worker


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_worker_that_cannot_start_answers_failed_with_the_reason(monkeypatch):
    def broken(*args, **kwargs):
        raise AttributeError("module 'triton.runtime.interpreter' has no attribute 'X'")

    monkeypatch.setattr(worker, "Worker", broken)
    arena = Arena.create(1 << 16)
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the solution process: serve never returns
        ours.close()
        worker.serve(Link(theirs), arena.fd, 1 << 16, "cpu")
    theirs.close()
    link = Link(ours)
    link.send({"kind": "setup"})
    reply = link.receive(30.0)
    _, status = os.waitpid(pid, 0)
    assert reply["kind"] == "failed" and reply["stage"] == "worker"
    assert "could not start" in reply["error"] and "has no attribute 'X'" in reply["error"]
    assert os.waitstatus_to_exitcode(status) == 2
