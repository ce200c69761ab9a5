"""The baseline server (`reference.baseline_server`): cold baseline children forked from one
process that has made their imports, steered as the program child is (limit, stop, the caller's
death), and the program child wherever no server serves."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from kernelbench_v3.catalog.problem import get_problem
from kernelbench_v3.evaluate.process_tree import alive
from kernelbench_v3.evaluate.solution import sandbox, zygote_server
from kernelbench_v3.evaluate.supervisor.reference import baseline_server
from kernelbench_v3.evaluate.supervisor.reference.isolate import run_child
from tests.evaluate.servers import own_servers

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract Unix sockets are Linux's"),
]
slow = pytest.mark.slow  # each starts a server: an import of torch and torch.compile


@pytest.fixture
def own_server(monkeypatch):
    """The server on, under a name no other test shares (a tag in the fingerprint); its pids
    (appended by the test) killed afterwards."""
    if sandbox.available().network != "netns":
        pytest.skip("no network namespace here: the server is not used (baseline_server.wanted)")
    monkeypatch.setenv(zygote_server.SERVER_ENV, "1")
    yield from own_servers(monkeypatch)


def _spec(**more):
    problem = get_problem("level1/26_GELU_")
    return {
        "device": "cpu",
        "problem_path": str(problem.path),
        "sizes": {"batch_size": 4, "dim": 64},
        "seeds": [42],
        "timing_seconds": 0.2,
        "compile": False,  # the child's own step, not what the server changes
        **more,
    }


def _hanging_problem(tmp_path):
    """A problem file whose import never ends: a child stuck in reference code."""
    path = tmp_path / "hangs.py"
    path.write_text("import time\ntime.sleep(600)\n")
    return _spec(problem_path=str(path), sizes={})


def _gone(pid: int, within_s: float = 20.0) -> bool:
    deadline = time.monotonic() + within_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


@slow
def test_later_baselines_are_forked_by_one_server_and_time_as_the_program_does(own_server, tmp_path):
    outcomes = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        outcomes.append(run_child("baseline", tmp_path / name, _spec(), timeout_s=180))
    first, second = (o.result for o in outcomes)
    assert first and second and first["ok"] and second["ok"], [o.reason or o.log_tail for o in outcomes]
    own_server.append(first["served"]["server_pid"])
    assert first["served"]["server_pid"] == second["served"]["server_pid"]
    assert second["eager"]["median_ms"] > 0 and outcomes[1].returncode == 0
    (tmp_path / "c").mkdir()
    os.environ[zygote_server.SERVER_ENV] = "0"  # monkeypatched: restored after the test
    program = run_child("baseline", tmp_path / "c", _spec(), timeout_s=180).result
    assert program and program["ok"] and "served" not in program
    assert set(program) == set(second) - {"served"}  # the same fields, whichever way it started


@slow
def test_a_served_child_past_its_limit_or_stopped_is_killed_with_what_it_started(own_server, tmp_path):
    (tmp_path / "warm").mkdir()
    warm = run_child("baseline", tmp_path / "warm", _spec(), timeout_s=180).result  # the server listens now
    own_server.append(warm["served"]["server_pid"])
    (tmp_path / "late").mkdir()
    late = run_child("baseline", tmp_path / "late", _hanging_problem(tmp_path), timeout_s=2)
    assert late.timed_out and late.result is None and "timed out" in late.reason
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    (tmp_path / "stopped").mkdir()
    stopped = run_child("baseline", tmp_path / "stopped", _hanging_problem(tmp_path), timeout_s=600, stop=stop)
    assert stopped.stopped and stopped.result is None
    assert stopped.returncode == baseline_server.DIED_UNSAID  # ended without saying its status
    os.kill(warm["served"]["server_pid"], 0)  # the server serves on


@slow
def test_a_served_child_dies_with_its_caller(own_server, tmp_path):
    (tmp_path / "spec").mkdir()
    caller = (
        "import json, os, sys; from pathlib import Path\n"
        "from kernelbench_v3.evaluate.supervisor.reference import baseline_server\n"
        "d = Path(sys.argv[1]); (d / 'spec.json').write_text(sys.argv[2])\n"
        "child = baseline_server.start('baseline', d, dict(os.environ), 60)\n"
        "print(child.pid, flush=True); sys.stdin.read()\n"
    )
    import json

    proc = subprocess.Popen(
        [sys.executable, "-c", caller, str(tmp_path / "spec"), json.dumps(_hanging_problem(tmp_path))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    child_pid = int(proc.stdout.readline())
    own_server.append(int(open(f"/proc/{child_pid}/stat").read().rsplit(")", 1)[1].split()[1]))  # its parent
    assert alive(child_pid)
    proc.kill()
    proc.wait()
    assert _gone(child_pid), "the caller was killed and its baseline child lived on"


@slow
def test_no_server_that_answers_leaves_the_program_child(own_server, tmp_path, monkeypatch):
    monkeypatch.setattr(baseline_server, "SERVER_MODULE", "kernelbench_v3.no_such_module")
    (tmp_path / "a").mkdir()
    launched = []
    real_launch = zygote_server.launch_server
    monkeypatch.setattr(zygote_server, "launch_server", lambda *a: launched.append(a) or real_launch(*a))
    assert baseline_server.start("baseline", tmp_path / "a", dict(os.environ), 60) is None
    assert baseline_server.start("baseline", tmp_path / "a", dict(os.environ), 60) is None
    assert len(launched) == 1  # a server seen failing is not launched again by this process
    outcome = run_child("baseline", tmp_path / "a", _spec(), timeout_s=180)
    assert outcome.result and outcome.result["ok"] and "served" not in outcome.result


@slow
def test_a_server_that_cannot_serve_says_so_and_callers_start_the_program(own_server, tmp_path, monkeypatch):
    """Its imports opened CUDA (here: told so at its start): it listens anyway and refuses each
    request at once, so no caller launches a server of its own and waits for its imports (the
    caller then starts the program child: `test_no_server_that_answers_leaves_the_program_child`)."""
    monkeypatch.setenv(
        "PYTORCH_NO_CUDA_MEMORY_CACHING", "1"
    )  # a variable the name fingerprints: a server of this test's own
    name = baseline_server.address(dict(os.environ))
    code = (
        "import sys, torch; from kernelbench_v3.evaluate.supervisor.reference import baseline_server as b; "
        "torch.cuda.is_initialized = lambda: True; b.server_main('\\0' + sys.argv[1], 60.0)"
    )
    server = subprocess.Popen([sys.executable, "-c", code, name.lstrip("\0")])
    own_server.append(server.pid)
    deadline = time.monotonic() + 120
    while zygote_server.connect_to(name) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    launched = []
    monkeypatch.setattr(zygote_server, "launch_server", lambda *a: launched.append(a))
    (tmp_path / "a").mkdir()
    assert baseline_server.start("baseline", tmp_path / "a", dict(os.environ), 60) is None
    assert launched == [] and server.poll() is None  # refused by the listening server, which serves on
    assert baseline_server.start("baseline", tmp_path / "a", dict(os.environ), 60) is None  # and again


def test_a_server_whose_imports_opened_cuda_refuses_to_serve(monkeypatch):
    import torch

    from kernelbench_v3.evaluate.supervisor.reference import baseline_child

    monkeypatch.setattr(baseline_child, "import_compiler", lambda: None)
    monkeypatch.setenv(baseline_server.NVML_CHECK_ENV, "0")  # restored afterwards: the server sets it
    baseline_server.import_compiler()  # nothing opened CUDA here: it serves
    assert os.environ[baseline_server.NVML_CHECK_ENV] == "1"  # is_available() by NVML, no driver init
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(RuntimeError, match="initialized CUDA"):
        baseline_server.import_compiler()


def test_a_server_whose_forks_are_bad_forks_refuses_to_serve(monkeypatch):
    """On an H100 torch.compile's imports asked the CUDA runtime for the device count: CUDA was
    not initialized, yet every fork was a bad fork that raised at its first CUDA call. The
    server forks one to see (here torch is told it is a bad fork, as the driver would make it)."""
    import torch

    from kernelbench_v3.evaluate.supervisor.reference import baseline_child

    monkeypatch.setattr(baseline_child, "import_compiler", lambda: None)
    monkeypatch.setattr(torch.cuda, "_is_in_bad_fork", lambda: True)
    with pytest.raises(RuntimeError, match="initialized CUDA"):
        baseline_server.import_compiler()


def test_the_name_is_the_users_and_changes_with_what_the_imports_read():
    env = {"PATH": "/bin", "TRITON_INTERPRET": "0"}
    name = baseline_server.address(env)
    assert name.startswith("\0kbv3-baseline-") and f"-{os.getuid()}-" in name
    assert baseline_server.address({**env, "TRITON_INTERPRET": "1"}) != name  # the gate kernels' mode
    assert baseline_server.address({**env, "CUDA_MPS_PIPE_DIRECTORY": "/tmp/p"}) == name  # set per child
    assert name != zygote_server.address("baseline", env)  # never the zygote server's


def test_it_is_off_with_the_zygote_server(monkeypatch):
    monkeypatch.setenv(zygote_server.SERVER_ENV, "0")
    assert not baseline_server.wanted()
