"""`kbv3 serve` end to end on the CPU with its real worker: a warm supervisor evaluating the
Softmax example (Triton interpreter, small sizes, correctness only), `kbv3 eval --server` giving
what `kbv3 eval` gives, a supervisor worker killed mid-request, SIGTERM. One service for the
module; each test is over 2 s (torch, the zygote, the evaluation)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from kernelbench_v3.evaluate.process_tree import alive, descendants
from kernelbench_v3.serve import Evaluator
from tests.paths import EXAMPLES, REPO

pytestmark = pytest.mark.slow

SOFTMAX = "level1/23_Softmax"
SOLUTION = EXAMPLES / "level1/23_Softmax.py"
FAST = {
    "baseline": False,
    "time_solution": False,
    "seeds": (42, 123),
    "other_shape": False,
    "sizes": {"batch_size": 4, "dim": 96},
}
CLI_FAST = ["--sizes", "batch_size=4,dim=96", "--no-baseline", "--no-timing", "--seeds", "42,123", "--no-other-shape"]
# Fields that differ between any two evaluations of the same solution (times, temp folders)
VOLATILE = {"duration_s", "phase_s", "started_at", "reference_cached", "log_tail"}
VOLATILE |= {"wall_s", "wall_phase_s", "wall_background_s"}  # the CLI process's own seconds
VOLATILE_SANDBOX = {"writable", "device_open_s"}
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def kbv3(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernelbench_v3", *args],
        env=ENV,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def wait_for(condition, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def service():
    folder = tempfile.mkdtemp(prefix="kbv3-s-")
    path = Path(folder) / "s.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelbench_v3", "serve", "--socket", str(path), "--device", "cpu"],
        env=ENV,
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: path.exists() or proc.poll() is not None, 60)
        assert proc.poll() is None, proc.stderr.read()
        client = Evaluator(path, timeout_s=300)
        wait_for(lambda: client.status()["workers"][0]["ready"], 180)
        yield proc, path, client
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        path.unlink(missing_ok=True)
        os.rmdir(folder)


def test_a_warm_worker_evaluates_source_text(service):
    _, _, client = service
    source = SOLUTION.read_text()
    first = client.submit(SOFTMAX, source, **FAST)
    assert first.record.correct, first.record.error
    assert first.record.solution_path == "<source>"
    assert first.record.solution_sha256 == hashlib.sha256(source.encode()).hexdigest()
    assert first.record.checks["correctness"] == "pass"
    again = client.submit(SOFTMAX, SOLUTION, **FAST)  # the same worker, its zygote still warm
    assert again.record.correct and again.worker == first.worker and again.sequence == first.sequence + 1
    assert again.record.solution_path == str(SOLUTION.resolve())


def stable(record: dict) -> dict:
    out = {k: v for k, v in record.items() if k not in VOLATILE}
    out["sandbox_details"] = {k: v for k, v in out["sandbox_details"].items() if k not in VOLATILE_SANDBOX}
    # The evaluator's reap can catch the finished solution process before it has exited, in or
    # out of the service, now and then (`kbv3 eval` twice in a row shows it): not the service's.
    out["warnings"] = [w for w in out["warnings"] if not w.startswith("leftover_processes:")]
    # Which calls were sampled for evidence is random by design, and so are their wall times.
    sampled = ("evidence_samples", "judged_on", "outside_programs_s", "reference_compute_s")
    out["kernel_evidence"] = {k: v for k, v in out["kernel_evidence"].items() if k not in sampled}
    # ... and the wall times some check details quote ("0.00383 ms outside them").
    out["check_details"] = {k: re.sub(r"[\d.e+-]+ ms\b", "_ ms", v) for k, v in out["check_details"].items()}
    return out


def test_eval_server_prints_what_eval_prints(service):
    _, path, _ = service
    common = ["eval", "--problem", SOFTMAX, "--solution", str(SOLUTION), "--device", "cpu", *CLI_FAST]
    here, there = kbv3(*common, "--json"), kbv3(*common, "--json", "--server", str(path))
    assert here.returncode == there.returncode == 0, here.stderr + there.stderr
    local, served = stable(json.loads(here.stdout)), stable(json.loads(there.stdout))
    assert local == served
    text = kbv3(*common, "--server", str(path))
    assert text.returncode == 0
    assert text.stdout.splitlines()[0] == f"{SOFTMAX}  <-  {SOLUTION.resolve()}"
    assert "status: correct" in text.stdout
    refused = kbv3(*common, "--server", str(path.parent / "none.sock"))
    assert refused.returncode == 2 and "argument --server: no kbv3 serve is listening" in refused.stderr


def test_a_killed_supervisor_worker_costs_one_record(service):
    _, _, client = service
    before = client.status()["workers"][0]
    out: dict = {}
    timed = {**FAST, "time_solution": True, "timing_seconds": 30.0}  # long enough to be killed mid-way
    thread = threading.Thread(target=lambda: out.update(record=client.evaluate(SOFTMAX, SOLUTION, **timed)))
    thread.start()
    wait_for(lambda: client.status()["workers"][0]["busy"])
    wait_for(lambda: len(descendants(before["pid"])) >= 2)  # its zygote and the solution process
    below = descendants(before["pid"])
    os.kill(before["pid"], signal.SIGKILL)
    thread.join(120)
    lost = out["record"]
    assert lost.status == "error" and "worker cpu0 died during this evaluation (signal 9)" in lost.error
    wait_for(lambda: not any(alive(p) for p in below), 30)  # its zygote and solution process went with it
    after = client.evaluate(SOFTMAX, SOLUTION, **FAST)
    assert after.correct, after.error
    status = client.status()["workers"][0]
    assert status["restarts"] == before["restarts"] + 1 and status["pid"] != before["pid"]


def test_sigterm_stops_the_service_cleanly(service):
    proc, path, client = service
    pid = client.status()["workers"][0]["pid"]
    below = descendants(pid)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0
    assert not path.exists()
    wait_for(lambda: not alive(pid) and not any(alive(p) for p in below), 30)
