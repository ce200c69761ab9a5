"""`kbv3 eval` run by the warm server (`cli.served`): the first run launches the server, later
runs are its children, on the caller's own stdout and stderr, with the caller's exit status,
Ctrl-C and SIGTERM as the program's own, and nothing left when the caller is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from kernelbench_v3.cli import served
from kernelbench_v3.evaluate.solution import zygote_server
from kernelbench_v3.evaluate.solution.zygote import zygote_env
from tests.paths import EXAMPLES, REPO

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract Unix sockets are Linux's")
SOFTMAX = str(EXAMPLES / "level1/23_Softmax.py")
FAST = ["--device", "cpu", "--sizes", "batch_size=4,dim=96", "--no-baseline", "--seeds", "42", "--no-other-shape"]
FAST += ["--timing-seconds", "0.3"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["eval", "--problem", "p", "--solution", "s"], True),
        (["eval-batch", "--solutions", "d"], False),
        (["ls"], False),
        (["eval", "--help"], False),
        (["eval", "--problem", "p", "--server", "/tmp/s"], False),
        (["eval", "--server=/tmp/s"], False),
        ([], False),
    ],
)
def test_only_a_plain_kbv3_eval_is_served(monkeypatch, argv, expected):
    monkeypatch.setenv(zygote_server.SERVER_ENV, "1")
    monkeypatch.setattr(served, "_usable", lambda fd: True)
    assert served.wanted(argv) is (expected and sys.platform.startswith("linux"))


def test_the_switch_and_a_missing_descriptor_keep_it_in_process(monkeypatch):
    monkeypatch.setattr(served, "_usable", lambda fd: True)
    monkeypatch.setenv(zygote_server.SERVER_ENV, "0")
    assert not served.wanted(["eval"])
    monkeypatch.setenv(zygote_server.SERVER_ENV, "1")
    monkeypatch.setattr(served, "_usable", lambda fd: fd != 0)
    assert not served.wanted(["eval"])


def test_the_device_comes_from_the_arguments_else_a_guess_without_torch():
    assert served.device_of(["eval", "--device", "cpu"]) == "cpu"
    assert served.device_of(["eval", "--device=cuda"]) == "cuda"
    assert served.device_of(["eval"]) in ("cpu", "cuda")


def test_no_server_means_the_caller_runs_it(monkeypatch):
    monkeypatch.setenv("KBV3_TEST_SERVER_TAG", uuid.uuid4().hex)  # a name nobody listens on
    assert served.run_served(["eval", "--device", "cpu"], time.monotonic()) is None


def _env(tag: str, cache) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        zygote_server.SERVER_ENV: "1",
        zygote_server.IDLE_ENV: "60",
        "KBV3_TEST_SERVER_TAG": tag,
        "KBV3_CACHE_DIR": str(cache),
    }


def _start(env, *args):
    return subprocess.Popen(
        [sys.executable, "-m", "kernelbench_v3", "eval", "--problem", "level1/23_Softmax", *args],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _server_pid(env) -> int | None:
    name = zygote_server.address("cpu", zygote_env("cpu", env)).lstrip("\0")
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if name.encode() in f.read():
                    return int(entry)
        except (OSError, ValueError):
            continue
    return None


def _children(pid: int) -> set[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return {int(c) for c in f.read().split()}
    except OSError:
        return set()


@linux
@pytest.mark.slow
def test_later_runs_are_served_whole_and_behave_as_the_program(tmp_path):
    env = _env(uuid.uuid4().hex, tmp_path / "cache")
    first = _start(env, "--solution", SOFTMAX, "--json", *FAST)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    server = _server_pid(env)
    assert server is not None, "the first run launched the server"
    try:
        assert "served_start" not in json.loads(out)["wall_phase_s"]

        second = _start(env, "--solution", SOFTMAX, "--json", *FAST)
        out, err = second.communicate(timeout=300)
        record = json.loads(out)  # stdout is the record alone, as the program's
        assert second.returncode == 0 and record["status"] == "correct", err
        assert "served_start" in record["wall_phase_s"] and record["wall_phase_s"]["supervisor_import"] < 1.0
        assert "evaluating level1/23_Softmax on cpu" in err

        wrong = _start(env, "--solution", str(tmp_path / "missing.py"), *FAST)
        out, err = wrong.communicate(timeout=60)
        assert wrong.returncode == 2 and err.strip().splitlines() == [
            f"kbv3 eval: argument --solution: {tmp_path / 'missing.py'} does not exist; give the solution's .py file"
        ]

        interrupted = _start(env, "--solution", SOFTMAX, *FAST)
        assert "evaluating" in interrupted.stderr.readline()
        interrupted.send_signal(signal.SIGINT)
        _, err = interrupted.communicate(timeout=60)
        assert interrupted.returncode == 130 and "kbv3 eval: interrupted" in err

        terminated = _start(env, "--solution", SOFTMAX, *FAST)
        assert "evaluating" in terminated.stderr.readline()
        terminated.send_signal(signal.SIGTERM)
        terminated.communicate(timeout=60)
        assert terminated.returncode == -signal.SIGTERM, "a SIGTERM ends the client by the signal, as the program"

        killed = _start(env, "--solution", SOFTMAX, *FAST)
        assert "evaluating" in killed.stderr.readline()
        before = _children(server)
        assert before, "the served evaluation is a child of the server"
        killed.kill()
        killed.wait(timeout=30)
        deadline = time.monotonic() + 20
        while _children(server) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _children(server), "the served evaluation and its zygote died with their caller"
    finally:
        os.kill(server, signal.SIGKILL)
