"""The service's frames and requests: bounded JSON, checked fields, requests that survive the trip."""

from __future__ import annotations

import socket

import pytest

from kernelbench_v3.evaluate import EvalOptions
from kernelbench_v3.serve.protocol import (
    MAX_FRAME_BYTES,
    BadRequest,
    Conn,
    Deadline,
    PeerGone,
    ProtocolError,
    error_record,
    parse_evaluate,
    request_from_json,
    request_to_json,
)
from tests.paths import EXAMPLES

SOLUTION = str(EXAMPLES / "level1/23_Softmax.py")


def evaluate_message(**fields):
    return {"kind": "evaluate", "problem_id": "level1/23_Softmax", "solution_path": SOLUTION, **fields}


def test_frames_round_trip_and_are_bounded():
    a, b = socket.socketpair()
    left, right = Conn(a), Conn(b)
    left.send({"kind": "x", "text": "é" * 10})
    assert right.receive(5) == {"kind": "x", "text": "é" * 10}
    with pytest.raises(ProtocolError, match="exceeds"):
        left.send({"kind": "x", "blob": "a" * MAX_FRAME_BYTES})
    with pytest.raises(ValueError):  # no NaN on the wire: the JSON stays standard
        left.send({"kind": "x", "v": float("nan")})
    a.sendall(b'\x00\x00\x00\x0c{"ki')  # part of a frame: Deadline, and the part stays buffered
    with pytest.raises(Deadline):
        right.receive(0.1)
    a.sendall(b'nd":"y"}')
    assert right.receive(5) == {"kind": "y"}
    left.close()
    with pytest.raises(PeerGone):
        right.receive(5)
    right.close()


def test_a_request_survives_the_trip_to_the_worker():
    options = EvalOptions(tolerance="strict", seeds=(1, 2), time_solution=False, timing_seconds=2.5)
    original = options.request(
        "level1/23_Softmax", SOLUTION, gpu="b200", device="cpu", sizes={"dim": 64, "batch_size": 2}, model="m"
    )
    assert request_from_json(request_to_json(original), SOLUTION) == original
    sent = {
        "tolerance": "strict",
        "seeds": [1, 2],
        "time_solution": False,
        "timing_seconds": 2.5,
        "gpu": "b200",
        "sizes": {"dim": 64, "batch_size": 2},
        "model": "m",
    }
    job = parse_evaluate(evaluate_message(options=sent), "cpu")
    assert request_from_json(job["request"], SOLUTION) == original


@pytest.mark.parametrize(
    "message, match",
    [
        (evaluate_message(extra_field=1), "unknown request field"),
        (evaluate_message(problem_id=""), "no problem_id"),
        (evaluate_message(source="x = 1\n"), "not both"),
        ({"kind": "evaluate", "problem_id": "level1/23_Softmax"}, "not both or neither"),
        (evaluate_message(solution_path="rel/sol.py"), "absolute"),
        (evaluate_message(solution_path="/no/such/sol.py"), "does not exist"),
        (evaluate_message(options={"colour": "red"}), "unknown option"),
        (evaluate_message(options={"device": "cuda"}), "evaluates on cpu"),
        (evaluate_message(options={"seeds": []}), "seeds"),
        (evaluate_message(gpu_index="0"), "gpu_index"),
        (evaluate_message(problems_dir="problems"), "absolute"),
        (evaluate_message(problem_id="level1/nope"), "level1/nope"),
    ],
)
def test_bad_requests_say_what_is_wrong(message, match):
    with pytest.raises(BadRequest, match=match):
        parse_evaluate(message, "cpu")


def test_the_error_record_of_a_lost_request_names_problem_and_solution():
    job = parse_evaluate(evaluate_message(options={"model": "m", "gpu": "h100"}), "cpu")
    record = error_record(job, "the worker died")
    assert record["status"] == "error" and record["error"] == "the worker died" and not record["correct"]
    assert record["problem"] == "23_Softmax.py" and record["level"] == 1 and record["gpu"] == "H100"
    assert record["model"] == "m" and record["device"] == "cpu" and len(record["solution_sha256"]) == 64
    source_job = parse_evaluate({"kind": "evaluate", "problem_id": "level1/23_Softmax", "source": "x = 1\n"}, "cpu")
    assert error_record(source_job, "lost")["solution_path"] == "<source>"


def test_evaluate_forwards_to_submit_without_repeating_its_signature(tmp_path, monkeypatch):
    """Issue 33, item 7: `Evaluator.submit` declares the request's keywords once; `evaluate`
    passes them through and returns the record, so the two cannot drift apart."""
    import inspect

    from kernelbench_v3.evaluate.record import Record
    from kernelbench_v3.serve.client import Evaluator

    evaluate_params = set(inspect.signature(Evaluator.evaluate).parameters)
    submit_params = set(inspect.signature(Evaluator.submit).parameters)
    assert {"gpu_index", "problems_dir", "cache_dir"} <= submit_params
    assert not evaluate_params & {"gpu_index", "problems_dir", "cache_dir"}, evaluate_params

    sent = []

    def ask(self, message, expect):
        sent.append(message)
        return {"kind": "record", "record": Record(problem_id=message["problem_id"]).to_dict(), "worker": "cpu"}

    monkeypatch.setattr(Evaluator, "_ask", ask)
    record = Evaluator(tmp_path / "s.sock").evaluate(
        "level1/23_Softmax", "class Model: ...\n", gpu_index=1, cache_dir=tmp_path, seeds=(42,)
    )
    assert isinstance(record, Record) and record.problem_id == "level1/23_Softmax"
    (message,) = sent
    assert message["gpu_index"] == 1 and message["cache_dir"] == str(tmp_path.resolve())
    assert message["source"] == "class Model: ...\n" and message["options"]["seeds"] == [42]
