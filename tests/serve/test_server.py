"""The service's queueing, crash recovery, socket permissions and shutdown, with a stand-in
worker (`fake_worker.py`: the worker protocol without torch), so each test takes well under a
second or two. The real worker is exercised in `test_service.py`."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from kernelbench_v3.evaluate.process_tree import alive
from kernelbench_v3.serve import Evaluator, RequestError, ServiceUnavailable
from kernelbench_v3.serve.protocol import MAX_FRAME_BYTES, Conn
from kernelbench_v3.serve.server import ServeError, Server
from tests.paths import EXAMPLES, REPO

FAKE = [sys.executable, str(Path(__file__).with_name("fake_worker.py"))]
SOFTMAX = "level1/23_Softmax"
SOLUTION = EXAMPLES / "level1/23_Softmax.py"


@pytest.fixture
def where():
    """A short folder for the socket (sun_path holds 107 bytes) and the path in it."""
    with tempfile.TemporaryDirectory(prefix="kbv3-s-") as folder:
        yield Path(folder) / "run" / "s.sock"


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch):
    """The service's threads wake every POLL_S to look for work, a stop or a hung-up client;
    a shorter poll here only makes the tests wait less (the subprocess ones keep the real one)."""
    from kernelbench_v3.serve import server, slot

    monkeypatch.setattr(slot, "POLL_S", 0.02)
    monkeypatch.setattr(server, "POLL_S", 0.02)


@contextmanager
def running(path: Path, **kwargs):
    server = Server(path, command=FAKE, **{"device": "cpu", **kwargs})
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        thread.join(15)
        assert not thread.is_alive()


def wait_for(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def in_thread(fn, *args, **kwargs):
    """Run fn in a thread; returns a function that joins it and gives fn's result (or raises)."""
    out: dict = {}

    def body():
        try:
            out["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the joining test
            out["error"] = exc

    thread = threading.Thread(target=body, daemon=True)
    thread.start()

    def join():
        thread.join(30)
        assert not thread.is_alive(), "request did not come back"
        if "error" in out:
            raise out["error"]
        return out["value"]

    return join


def worker(client: Evaluator, name: str) -> dict:
    return next(w for w in client.status()["workers"] if w["name"] == name)


# ----------------------------------------------------------------------------- queueing


@pytest.mark.slow
def test_two_concurrent_clients_both_get_records_in_order(where):
    with running(where):
        first, second = Evaluator(where, timeout_s=30), Evaluator(where, timeout_s=30)
        gate = where.parent / "open"
        a = in_thread(first.submit, SOFTMAX, SOLUTION, model=f"wait={gate}")
        wait_for(lambda: worker(first, "cpu0")["busy"])
        b = in_thread(second.submit, SOFTMAX, "print('x')\n", model="second")
        wait_for(lambda: worker(first, "cpu0")["queued"] == 1)
        time.sleep(0.3)  # the second's wait, which its queued_s must show
        gate.touch()
        ra, rb = a(), b()
    assert (ra.record.model, rb.record.model) == (f"wait={gate}", "second")
    assert (ra.worker, rb.worker) == ("cpu0", "cpu0")
    assert (ra.sequence, rb.sequence) == (1, 2)  # one queue, served in order
    assert rb.queued_s > 0.2  # the second waited for the first
    assert ra.record.solution_path == str(SOLUTION.resolve())  # a path travels as a path
    assert rb.record.warnings[2] == "source=" + repr("print('x')\n")  # text travels as text


@pytest.mark.slow
def test_requests_queue_per_gpu_named_or_least_loaded(where):
    # A "cuda" service with a stand-in worker: two queues, no GPU needed.
    with running(where, device="cuda", gpus=[0, 1]):
        client = Evaluator(where, timeout_s=30)
        gate = where.parent / "open"
        models = [f"wait={gate}#{i}" for i in range(3)]  # all held until the gate opens
        joins = []
        for i, model in enumerate(models):
            joins.append(in_thread(client.submit, SOFTMAX, SOLUTION, gpu_index=1, model=model))
            wait_for(lambda n=i: worker(client, "gpu1")["busy"] + worker(client, "gpu1")["queued"] == n + 1)
        other = client.submit(SOFTMAX, SOLUTION, model="free")  # least loaded: gpu0 is idle
        gate.touch()
        replies = [join() for join in joins]
        assert other.worker == "gpu0" and other.sequence == 1
        assert [r.worker for r in replies] == ["gpu1"] * 3
        assert [r.sequence for r in replies] == [1, 2, 3]  # in the order they were queued
        assert [r.record.model for r in replies] == models
        with pytest.raises(RequestError, match="no GPU 5"):
            client.evaluate(SOFTMAX, SOLUTION, gpu_index=5)


def test_bad_requests_are_refused_without_a_record(where):
    with running(where):
        client = Evaluator(where, timeout_s=30)
        with pytest.raises(RequestError, match="unknown option"):
            client.evaluate(SOFTMAX, SOLUTION, no_such_option=1)
        with pytest.raises(RequestError, match="evaluates on cpu"):
            client.evaluate(SOFTMAX, SOLUTION, device="cuda")
        with pytest.raises(RequestError, match="level1/no_such_problem"):
            client.evaluate("level1/no_such_problem", SOLUTION)
        with pytest.raises(RequestError, match="tolerance"):
            client.evaluate(SOFTMAX, SOLUTION, tolerance="loose")
        with pytest.raises(RequestError, match="refused by the fake worker"):
            client.evaluate(SOFTMAX, SOLUTION, model="raise")
        with pytest.raises(FileNotFoundError):
            client.evaluate(SOFTMAX, Path("/no/such/solution.py"))
        # a raw client: a relative path, a frame that is not JSON, an unknown kind
        conn = connect(where)
        conn.send({"kind": "evaluate", "problem_id": SOFTMAX, "solution_path": "sol.py"})
        assert "absolute" in conn.receive(10)["error"]
        conn.send({"kind": "dance"})
        assert "unknown request kind" in conn.receive(10)["error"]
        conn.sock.sendall(b"\x00\x00\x00\x03abc")
        assert "not JSON" in conn.receive(10)["error"]
        conn.close()
        conn = connect(where)
        conn.sock.sendall((MAX_FRAME_BYTES + 1).to_bytes(4, "big"))
        assert "exceeds" in conn.receive(10)["error"]
        conn.close()
        assert client.evaluate(SOFTMAX, SOLUTION, model="still here").correct


def connect(path: Path) -> Conn:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(path))
    return Conn(sock)


# ----------------------------------------------------------------------------- crash recovery


def test_a_killed_worker_costs_one_record_and_is_restarted(where):
    with running(where):
        client = Evaluator(where, timeout_s=30)
        wait_for(lambda: worker(client, "cpu0")["ready"])
        pid = worker(client, "cpu0")["pid"]
        pending = in_thread(client.evaluate, SOFTMAX, SOLUTION, model="hang")
        wait_for(lambda: worker(client, "cpu0")["busy"])
        queued = in_thread(client.evaluate, SOFTMAX, SOLUTION, model="after the crash")
        wait_for(lambda: worker(client, "cpu0")["queued"] == 1)
        os.kill(pid, signal.SIGKILL)
        lost = pending()
        assert lost.status == "error" and not lost.correct
        assert "worker cpu0 died during this evaluation (signal 9)" in lost.error
        assert lost.problem_id == SOFTMAX and lost.problem == "23_Softmax.py" and lost.level == 1
        assert lost.solution_sha256 and lost.problem_sha256
        after = queued()  # the next request is served by the restarted worker
        assert after.correct and after.model == "after the crash"
        status = worker(client, "cpu0")
        assert status["restarts"] == 1 and status["pid"] not in (None, pid) and status["alive"]
        assert f"pid={pid}" not in after.warnings


def test_a_worker_that_dies_by_itself_costs_one_record(where):
    with running(where):
        client = Evaluator(where, timeout_s=30)
        crashed = client.evaluate(SOFTMAX, SOLUTION, model="crash")
        assert crashed.status == "error" and "died during this evaluation" in crashed.error
        assert client.evaluate(SOFTMAX, SOLUTION, model="fine").correct
        assert worker(client, "cpu0")["restarts"] == 1


def test_a_worker_that_dies_while_idle_is_started_again_for_the_next_request(where):
    with running(where):
        client = Evaluator(where, timeout_s=30)
        wait_for(lambda: worker(client, "cpu0")["ready"])
        os.kill(worker(client, "cpu0")["pid"], signal.SIGKILL)
        wait_for(lambda: not worker(client, "cpu0")["alive"])
        assert client.evaluate(SOFTMAX, SOLUTION, model="fine").correct


# ----------------------------------------------------------------------------- the socket


def test_the_socket_is_owner_only_in_a_folder_created_0700(where):
    with running(where):
        assert stat.S_ISSOCK(where.lstat().st_mode)
        assert stat.S_IMODE(where.lstat().st_mode) == 0o600
        assert stat.S_IMODE(where.parent.stat().st_mode) == 0o700
        assert where.lstat().st_uid == os.getuid()
    assert not where.exists()


def test_refuses_to_start_on_the_socket_of_a_live_server(where):
    with running(where):
        with pytest.raises(ServeError, match="already listening"):
            Server(where, command=FAKE)
        assert Evaluator(where, timeout_s=30).evaluate(SOFTMAX, SOLUTION).correct  # the first one is untouched
        assert where.exists()


def test_a_stale_socket_file_is_replaced(where):
    where.parent.mkdir(mode=0o700)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(where))  # a socket file whose server is gone (it never unlinked it)
    dead.close()
    assert where.exists()
    with running(where):
        assert Evaluator(where, timeout_s=30).evaluate(SOFTMAX, SOLUTION).correct


def test_refuses_a_path_that_is_not_a_socket_or_an_open_folder(where):
    where.parent.mkdir(mode=0o700)
    where.write_text("keep me")
    with pytest.raises(ServeError, match="not a socket"):
        Server(where, command=FAKE)
    assert where.read_text() == "keep me"
    where.unlink()
    os.chmod(where.parent, 0o777)
    with pytest.raises(ServeError, match="writable by other users"):
        Server(where, command=FAKE)
    with pytest.raises(ServeError, match="longer than"):
        Server(where.parent / ("x" * 120), command=FAKE)


def test_no_service_is_one_clear_error(where):
    with pytest.raises(ServiceUnavailable, match="no kbv3 serve is listening"):
        Evaluator(where).status()


# ----------------------------------------------------------------------------- shutdown


def test_a_shutdown_request_stops_the_service_and_answers_what_waits(where):
    server = Server(where, command=FAKE)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    client = Evaluator(where, timeout_s=30)
    running_one = in_thread(client.evaluate, SOFTMAX, SOLUTION, model="hang")
    wait_for(lambda: worker(client, "cpu0")["busy"])
    queued_one = in_thread(client.evaluate, SOFTMAX, SOLUTION, model="queued")
    wait_for(lambda: worker(client, "cpu0")["queued"] == 1)
    pid = worker(client, "cpu0")["pid"]
    client.shutdown()
    thread.join(15)
    assert not thread.is_alive()
    assert not where.exists()
    assert "shut down during this evaluation" in running_one().error
    assert "shut down before this evaluation started" in queued_one().error
    wait_for(lambda: not alive(pid))
    with pytest.raises(ServiceUnavailable):
        client.status()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_service_cleanly(where, sig):
    """SIGTERM to the service, SIGINT to its whole process group (a terminal's Ctrl-C)."""
    code = (
        "import sys\n"
        "from kernelbench_v3.serve.server import serve\n"
        f"sys.exit(serve({str(where)!r}, device='cpu', command={FAKE!r}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=env, cwd=REPO, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        wait_for(lambda: where.exists(), 30)
        client = Evaluator(where, timeout_s=30)
        wait_for(lambda: worker(client, "cpu0")["ready"], 30)
        pid = worker(client, "cpu0")["pid"]
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        assert proc.wait(30) == 0
        assert not where.exists()
        wait_for(lambda: not alive(pid))
        err = proc.stderr.read()
        assert "stopped" in err and "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_a_worker_past_its_watchdog_costs_one_record_and_is_restarted(where, monkeypatch, caplog):
    import logging

    from kernelbench_v3 import workers

    caplog.set_level(logging.INFO, logger="kernelbench_v3")
    monkeypatch.setattr(workers, "WATCHDOG_SLACK_S", 0.5)  # watchdog: 4 x 0.1 s + 0.5 s
    with running(where):
        client = Evaluator(where, timeout_s=30)
        wait_for(lambda: worker(client, "cpu0")["ready"])
        pid = worker(client, "cpu0")["pid"]
        stuck = client.evaluate(SOFTMAX, SOLUTION, model="hang", timeout_s=0.1)
        assert stuck.status == "error" and "service watchdog: no result from worker cpu0" in stuck.error
        assert client.evaluate(SOFTMAX, SOLUTION, model="fine").correct
        status = worker(client, "cpu0")
        assert status["restarts"] == 1 and status["pid"] != pid
        wait_for(lambda: not alive(pid))
    # What the service says goes through `logging` (issue 29): the restart, and its start and end.
    said = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert any(
        n == "kernelbench_v3.serve.slot" and lvl == logging.WARNING and "past its watchdog" in m for n, lvl, m in said
    )
    assert any(n == "kernelbench_v3.serve.server" and m.startswith("listening on") for n, _, m in said)


@pytest.mark.slow
def test_a_worker_killed_past_its_watchdog_leaves_no_detached_process(where, monkeypatch, tmp_path):
    """Its zygote dies with it by a parent-death signal, and would hand what a solution detached
    there on to init: the service ends the worker's whole tree first."""
    from kernelbench_v3 import workers

    monkeypatch.setattr(workers, "WATCHDOG_SLACK_S", 0.5)
    pid_file = tmp_path / "detached.pid"
    detached = None
    with running(where):
        client = Evaluator(where, timeout_s=30)
        wait_for(lambda: worker(client, "cpu0")["ready"])
        try:
            stuck = client.evaluate(SOFTMAX, SOLUTION, model=f"hang-detached={pid_file}", timeout_s=0.1)
            assert "service watchdog" in stuck.error
            detached = int(pid_file.read_text())
            wait_for(lambda: not alive(detached), 5)
        finally:
            if detached is not None and alive(detached):
                os.kill(detached, signal.SIGKILL)


@pytest.mark.slow
def test_a_request_whose_client_left_is_dropped_from_the_queue(where):
    with running(where):
        client = Evaluator(where, timeout_s=30)
        gate = where.parent / "open"
        busy = in_thread(client.submit, SOFTMAX, SOLUTION, model=f"wait={gate}")
        wait_for(lambda: worker(client, "cpu0")["busy"])
        impatient = Evaluator(where, timeout_s=0.2)  # gives up while its request is queued
        with pytest.raises(TimeoutError):
            impatient.evaluate(SOFTMAX, SOLUTION, model="never run")
        wait_for(lambda: worker(client, "cpu0")["queued"] == 0)
        assert worker(client, "cpu0")["busy"]  # dropped from the queue, not run
        gate.touch()
        assert busy().sequence == 1
        after = client.submit(SOFTMAX, SOLUTION, model="next")
        assert after.sequence == 2 and after.record.model == "next"
