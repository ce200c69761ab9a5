"""The zygote's handle (`solution.zygote`): a spawn carries the supervisor's MPS folders as they
are at the spawn (the zygote may have started before the daemon), and a zygote whose ready was
never read is neither reaped nor waited for (it cannot have forked anything)."""

from __future__ import annotations

import json
import os
import socket

from kernelbench_v3.evaluate import process_tree
from kernelbench_v3.evaluate.mps_reaper import LOG_ENV, PIPE_ENV
from kernelbench_v3.evaluate.solution.zygote import Zygote, apply_spawn_env


def test_a_spawn_carries_the_mps_folders_the_supervisor_has_now(monkeypatch, tmp_path):
    monkeypatch.setenv(PIPE_ENV, "/tmp/kbv3-mps-x/pipe")
    monkeypatch.delenv(LOG_ENV, raising=False)
    handle = Zygote.__new__(Zygote)  # the handle alone: no zygote process is needed to read the request
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    handle.ctl, handle.device, handle.ready = ours, "cpu", {"kind": "zygote_ready"}
    theirs.send(json.dumps({"kind": "spawned", "pid": 4242}).encode())  # queued: the answer
    arena = os.open(os.devnull, os.O_RDONLY)
    try:
        spawned = handle.spawn(scratch=tmp_path, arena_fd=arena, arena_size=4096, limits={})
        data, fds, _, _ = socket.recv_fds(theirs, 1 << 16, 4)
    finally:
        os.close(arena)
    for fd in fds:
        os.close(fd)
    spawned.sock.close()
    msg = json.loads(data)
    assert spawned.pid == 4242 and msg["kind"] == "spawn"
    assert msg["env"] == {PIPE_ENV: "/tmp/kbv3-mps-x/pipe", LOG_ENV: None}


def test_the_child_takes_only_the_mps_folders_from_the_request(monkeypatch):
    monkeypatch.setenv(LOG_ENV, "/stale/log")
    monkeypatch.delenv(PIPE_ENV, raising=False)
    monkeypatch.delenv("KBV3_INJECTED", raising=False)
    apply_spawn_env({PIPE_ENV: "/new/pipe", LOG_ENV: None, "KBV3_INJECTED": "1", "LD_PRELOAD": "/evil.so"})
    assert os.environ[PIPE_ENV] == "/new/pipe" and LOG_ENV not in os.environ
    assert "KBV3_INJECTED" not in os.environ and os.environ.get("LD_PRELOAD") != "/evil.so"


def test_a_zygote_never_read_ready_is_killed_at_once_and_has_nothing_to_reap(tmp_path, monkeypatch):
    handle = Zygote("cpu", tmp_path / "zygote.log")

    def no_answer(timeout_s):
        raise AssertionError("asked the zygote something: a zygote still importing torch would keep us waiting")

    monkeypatch.setattr(handle, "_receive", no_answer)
    sent = []
    real_send = handle.ctl.send
    monkeypatch.setattr(
        handle,
        "ctl",
        type("Ctl", (), {"send": lambda self, b: sent.append(b) or real_send(b), "close": lambda self: None})(),
    )
    assert handle.reap() == 0
    handle.close()
    assert sent == [] and handle.proc.poll() is not None
    assert process_tree.descendants(handle.proc.pid) == []
