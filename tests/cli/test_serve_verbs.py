"""`kbv3 serve` and `kbv3 eval --server`: a mistake is one line and exit 2; a record from the
service prints as `kbv3 eval` prints it. A stand-in worker (tests/serve/fake_worker.py) serves,
so nothing here imports torch in a worker; the real worker is in tests/serve/test_service.py."""

from __future__ import annotations

import json
import tempfile
import threading
from pathlib import Path

import pytest

from kernelbench_v3.serve import server as serve_server
from kernelbench_v3.serve import slot
from kernelbench_v3.serve.server import Server
from tests.cli.test_cli_errors import one_line, run
from tests.paths import EXAMPLES
from tests.serve.test_server import FAKE

SOFTMAX = EXAMPLES / "level1" / "23_Softmax.py"
EVAL = ["eval", "--problem", "level1/23_Softmax", "--solution", str(SOFTMAX)]


@pytest.fixture
def where():
    with tempfile.TemporaryDirectory(prefix="kbv3-c-") as folder:
        yield Path(folder) / "s.sock"


@pytest.fixture
def fake_service(where, monkeypatch):
    # As in tests/serve/test_server.py (quick_polls): the service's threads wake every POLL_S to
    # look for work or a stop; a shorter poll only makes its shutdown, after each test, quicker.
    monkeypatch.setattr(slot, "POLL_S", 0.02)
    monkeypatch.setattr(serve_server, "POLL_S", 0.02)
    server = Server(where, device="cpu", command=FAKE)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield where
    server.shutdown()
    thread.join(15)


def test_serve_refuses_gpus_on_the_cpu(capsys):
    code, _, err = run(["serve", "--device", "cpu", "--gpus", "0"], capsys)
    assert code == 2 and "argument --gpus: only used with --device cuda" in one_line(err)


def test_serve_refuses_a_path_that_is_not_a_socket(where, capsys):
    where.write_text("keep me")
    code, _, err = run(["serve", "--socket", str(where), "--device", "cpu"], capsys)
    assert code == 2 and "argument --socket:" in one_line(err) and "not a socket" in err
    assert where.read_text() == "keep me"


def test_serve_refuses_the_socket_of_a_live_server(fake_service, capsys):
    code, _, err = run(["serve", "--socket", str(fake_service), "--device", "cpu"], capsys)
    assert code == 2 and "already listening" in one_line(err)


def test_eval_server_without_a_service_is_one_line(where, capsys):
    code, _, err = run([*EVAL, "--device", "cpu", "--server", str(where)], capsys)
    assert code == 2 and one_line(err).startswith("kbv3 eval: argument --server: no kbv3 serve is listening")


def test_eval_server_prints_the_services_record(fake_service, capsys):
    code, out, err = run([*EVAL, "--server", str(fake_service), "--model", "m1"], capsys)
    assert code == 0, err
    assert out.splitlines()[0] == f"level1/23_Softmax  <-  {SOFTMAX.resolve()}"
    code, out, _ = run([*EVAL, "--server", str(fake_service), "--json", "--model", "m2"], capsys)
    record = json.loads(out)
    assert code == 0 and record["model"] == "m2" and record["device"] == "cpu"
    # Every second of this CLI named: the service's phases, and its queue and frames as the call.
    parts = record["wall_phase_s"]
    assert list(parts)[:2] == ["cli_import", "cli_args"] and "service_status" in parts
    assert list(parts)[-2:] == ["evaluate_call", "unattributed"]
    assert sum(parts.values()) == pytest.approx(record["wall_s"], abs=1e-6)


def test_eval_server_refused_request_is_exit_2(fake_service, capsys):
    code, _, err = run([*EVAL, "--server", str(fake_service), "--device", "cuda"], capsys)
    assert code == 2 and "this service evaluates on cpu" in one_line(err)
