"""The warm zygote server (`solution.zygote_server`): one import shared by later callers, a
zygote per caller that lives and dies with it, and no way in from a sandboxed process."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time

import pytest

from kernelbench_v3.evaluate.process_tree import alive
from kernelbench_v3.evaluate.solution import sandbox, zygote_server
from kernelbench_v3.evaluate.solution.zygote import zygote_env
from kernelbench_v3.evaluate.solution.zygote_server import ServedZygote
from tests.evaluate.servers import own_servers

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract Unix sockets are Linux's")


def _gone(pid: int, within_s: float = 20.0) -> bool:
    deadline = time.monotonic() + within_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


slow = pytest.mark.slow  # each starts a server: an import of torch


@pytest.fixture
def own_server(monkeypatch):
    """A server name no other test shares (a tag in the fingerprint); killed afterwards."""
    yield from own_servers(monkeypatch)


@slow
def test_later_callers_share_one_server_and_each_gets_a_zygote_of_its_own(own_server, tmp_path):
    first = ServedZygote("cpu", tmp_path / "a.log")
    ready = first.wait_ready(120)
    own_server.append(first.server_pid)
    second = ServedZygote("cpu", tmp_path / "b.log")
    again = second.wait_ready(30)
    try:
        assert ready["served"] and again["served"]
        assert first.server_pid == second.server_pid is not None
        assert first.proc.pid != second.proc.pid != first.server_pid
        first.close()
        assert first.exited() and not second.exited()
        os.kill(second.server_pid, 0)  # the server outlives its callers' zygotes
    finally:
        second.close()
    assert second.exited()


@slow
def test_a_caller_asks_for_its_zygote_as_soon_as_it_connects(own_server, tmp_path):
    """The server reads a caller's request for REQUEST_WAIT_S only; a caller that kept it back
    until its solution phase (after a cold baseline) found the connection dropped and imported a
    zygote of its own. The zygote is asked for on connecting: its reply is waiting long before
    `wait_ready` reads it."""
    first = ServedZygote("cpu", tmp_path / "a.log")
    first.wait_ready(120)
    own_server.append(first.server_pid)
    second = ServedZygote("cpu", tmp_path / "b.log")
    try:
        assert second.ctl is not None  # connected to the running server
        readable, _, _ = select.select([second.ctl], [], [], zygote_server.REQUEST_WAIT_S / 2)
        assert readable, "no zygote was asked for before wait_ready"
        assert second.wait_ready(30)["served"]
    finally:
        first.close()
        second.close()


@slow
def test_a_served_zygote_dies_with_its_caller(own_server, tmp_path):
    caller = (
        "import sys; from pathlib import Path\n"
        "from kernelbench_v3.evaluate.solution.zygote_server import ServedZygote\n"
        "z = ServedZygote('cpu', Path(sys.argv[1])); z.wait_ready(120)\n"
        "print(z.proc.pid, z.server_pid, flush=True); sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", caller, str(tmp_path / "z.log")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    zygote_pid, server_pid = (int(x) for x in proc.stdout.readline().split())
    own_server.append(server_pid)
    proc.kill()
    proc.wait()
    assert _gone(zygote_pid), "the caller was killed and its zygote lived on"
    os.kill(server_pid, 0)


@slow
def test_the_server_refuses_a_request_that_names_another_process(own_server, tmp_path):
    handle = ServedZygote("cpu", tmp_path / "a.log")
    handle.wait_ready(120)
    own_server.append(handle.server_pid)
    handle.close()
    forged = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    forged.connect(handle._address)
    env = zygote_env("cpu")
    forged.send(json.dumps({"kind": "zygote", "pid": 1, "env": env, "cwd": "/"}).encode())
    forged.settimeout(30)
    assert forged.recv(1 << 16) == b""  # closed, no zygote forked
    forged.close()
    honest = ServedZygote("cpu", tmp_path / "b.log")  # and it still serves
    assert honest.wait_ready(30)["served"]
    honest.close()


@slow
def test_a_sandboxed_process_cannot_reach_the_server(own_server, tmp_path):
    if sandbox.available().network != "netns":
        pytest.skip("no network namespace here: the server is not used (zygote_server.wanted)")
    handle = ServedZygote("cpu", tmp_path / "a.log")
    handle.wait_ready(120)
    own_server.append(handle.server_pid)
    handle.close()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            sandbox.enter_sandbox([str(tmp_path)], allow_network=False)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                sock.connect(handle._address)
                said = "connected"
            except OSError as exc:
                said = type(exc).__name__
            os.write(w, said.encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        said = f.read()
    os.waitpid(pid, 0)
    assert said in ("ConnectionRefusedError", "FileNotFoundError"), said


@slow
def test_a_server_that_cannot_start_leaves_the_caller_a_zygote_of_its_own(own_server, tmp_path, monkeypatch):
    monkeypatch.setattr(
        zygote_server, "launch_server", lambda *a: subprocess.Popen([sys.executable, "-c", "raise SystemExit(4)"])
    )
    handle = ServedZygote("cpu", tmp_path / "a.log")
    try:
        ready = handle.wait_ready(120)
        assert not ready.get("served") and not handle.served and handle.proc.poll() is None
    finally:
        handle.close()


def test_the_name_changes_with_what_the_import_reads(monkeypatch):
    env = {"PATH": "/bin", "KBV3_X": "1"}
    base = zygote_server.address("cpu", env)
    assert zygote_server.address("cpu", {**env, "PATH": "/usr/bin", "PWD": "/x"}) == base  # not read at import
    assert zygote_server.address("cpu", {**env, "KBV3_X": "2"}) != base
    assert zygote_server.address("cpu", {**env, "TORCH_LOGS": "+dynamo"}) != base
    assert zygote_server.address("cuda", env) != base
    assert zygote_server.address("cpu", {**env, "CUDA_MPS_PIPE_DIRECTORY": "/tmp/p"}) == base  # given per spawn
    assert base.startswith("\0") and f"-{os.getuid()}-" in base


def test_it_is_off_by_the_environment(monkeypatch):
    monkeypatch.setenv(zygote_server.SERVER_ENV, "0")
    assert not zygote_server.wanted()
