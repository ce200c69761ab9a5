"""The data-only channel between supervisor and solution process: what it refuses.

Everything the solution process sends is untrusted, so each malformed, oversized, out-of-bounds
or unexpected message must become a clear error (ProtocolError / SessionLost), never a crash of
the supervisor, a read outside the arena, or an accepted value.
"""

from __future__ import annotations

import json
import socket
import struct
import threading

import pytest
import torch

from kernelbench_v3.evaluate.protocol import messages as M
from kernelbench_v3.evaluate.protocol.channel import (
    ALIGN,
    MAX_FRAME_BYTES,
    Arena,
    Deadline,
    Link,
    PeerGone,
    ProtocolError,
    TensorRef,
)
from kernelbench_v3.evaluate.supervisor.session import Session, SessionLost, conversation


def _pair():
    a, b = socket.socketpair()
    return Link(a), b


@pytest.mark.parametrize(
    "data, words",
    [
        ({"offset": 0, "shape": [2]}, "offset, shape and dtype"),
        ({"offset": -128, "shape": [2], "dtype": "float32"}, "aligned non-negative"),
        ({"offset": 3, "shape": [2], "dtype": "float32"}, "aligned non-negative"),
        ({"offset": True, "shape": [2], "dtype": "float32"}, "aligned non-negative"),
        ({"offset": 0, "shape": [-1], "dtype": "float32"}, "list of at most 8 sizes"),
        ({"offset": 0, "shape": [1] * 9, "dtype": "float32"}, "list of at most 8 sizes"),
        ({"offset": 0, "shape": "2", "dtype": "float32"}, "list of at most 8 sizes"),
        ({"offset": 0, "shape": [2], "dtype": "object"}, "is not one of"),
        ([0, [2], "float32"], "offset, shape and dtype"),
    ],
)
def test_tensor_references_are_validated(data, words):
    with pytest.raises(ProtocolError, match=words):
        TensorRef.from_json(data)


def test_the_arena_round_trips_tensors_and_refuses_to_read_past_its_end():
    arena = Arena.create(4096)
    try:
        x = torch.randn(4, 8)
        ref = arena.put(ALIGN, x)
        assert torch.equal(arena.view(TensorRef.from_json(ref.to_json())), x)
        assert arena.put(0, torch.tensor([True, False])).dtype == "bool"
        with pytest.raises(ProtocolError, match="overruns the arena"):
            arena.view(TensorRef(arena.size - ALIGN, (1024,), "float32"))
    finally:
        arena.close()


def test_messages_round_trip_and_partial_frames_wait_for_the_rest():
    link, other = _pair()
    blob = json.dumps({"kind": "warm", "x": 1}).encode()
    frame = struct.pack("!I", len(blob)) + blob
    other.sendall(frame[:3])
    with pytest.raises(Deadline):
        link.receive(0.05)
    other.sendall(frame[3:10])
    with pytest.raises(Deadline):
        link.receive(0.05)
    other.sendall(frame[10:])
    assert link.receive(1.0) == {"kind": "warm", "x": 1}


@pytest.mark.parametrize(
    "raw, error, words",
    [
        (struct.pack("!I", MAX_FRAME_BYTES + 1), ProtocolError, "exceeds"),
        (struct.pack("!I", 5) + b"nope!", ProtocolError, "not JSON"),
        (struct.pack("!I", 2) + b"[]", ProtocolError, "without a kind"),
        (struct.pack("!I", 11) + b'{"kind": 3}', ProtocolError, "without a kind"),
        (struct.pack("!I", 200_000) + b"[" * 100_000 + b"]" * 100_000, ProtocolError, "nested too deep"),
    ],
)
def test_malformed_frames_are_protocol_errors(raw, error, words):
    link, other = _pair()
    other.sendall(raw)
    with pytest.raises(error, match=words):
        link.receive(2.0)


def test_a_closed_channel_is_peer_gone():
    link, other = _pair()
    other.close()
    with pytest.raises(PeerGone):
        link.receive(2.0)


@pytest.mark.parametrize(
    "message, words",
    [
        ({"kind": "verdict", "correct": True}, "unexpected message kind"),
        ({"kind": "calls_done", "own_ms": [0.1], "evidence": {}}, "lacks 'calls'"),
        ({"kind": "calls_done", "calls": 4, "own_ms": ["fast"], "evidence": {}}, "finite numbers"),
        ({"kind": "calls_done", "calls": 4, "own_ms": [float("nan")], "evidence": {}}, "finite numbers"),
        ({"kind": "calls_done", "calls": True, "own_ms": [1.0], "evidence": {}}, "integer"),
        ({"kind": "timing_ready", "graphs": 1, "detail": "", "evidence": {}, "outputs": []}, "true or false"),
        (
            {"kind": "timing_ready", "graphs": True, "detail": "", "evidence": {}, "outputs": [{"handle": "00"}]},
            "handle, offset and nbytes",
        ),
        (
            {
                "kind": "timing_ready",
                "graphs": True,
                "detail": "",
                "evidence": {},
                "outputs": [{"handle": "ab" * 64, "offset": -1, "nbytes": 4}],
            },
            "must be sizes",
        ),
        (
            {
                "kind": "case_done",
                "case": "seed42",
                "output": {"type_name": "Tensor", "shape": [-2], "dtype": "float32"},
                "mutated_inputs": [],
                "aliases": [],
                "flag_changes": [],
                "evidence": {},
            },
            "list of sizes",
        ),
        (
            {"kind": "setup_done", "class_name": "Model", "state_dict": [], "import_flag_changes": [], "tampered": []},
            "mapping",
        ),
        (
            {
                "kind": "setup_done",
                "class_name": "Model",
                "state_dict": {"main": "ok"},
                "import_flag_changes": [],
                "tampered": [],
            },
            "mapping",
        ),
        (
            {
                "kind": "setup_done",
                "class_name": "Model",
                "state_dict": {"main": {"missing": [1]}},
                "import_flag_changes": [],
                "tampered": [],
            },
            "list of text",
        ),
        ({"kind": "finished", "tampered": [{"x": 1}]}, "list of text"),
        (
            {
                "kind": "case_done",
                "case": "s",
                "output": {"type_name": "int"},
                "mutated_inputs": ["0"],
                "aliases": [],
                "flag_changes": [],
                "evidence": {},
            },
            "list of integers",
        ),
        (
            {
                "kind": "case_done",
                "case": "s",
                "output": {"type_name": "int"},
                "mutated_inputs": [],
                "aliases": [],
                "flag_changes": [],
                "evidence": {"ops": {"mm": 3}},
            },
            "count, seconds",
        ),
        (
            {
                "kind": "case_done",
                "case": "s",
                "output": {"type_name": "int"},
                "mutated_inputs": [],
                "aliases": [],
                "flag_changes": [],
                "evidence": {"device_kernels": [["k", "fast"]]},
            },
            "finite numbers",
        ),
        (
            {
                "kind": "case_done",
                "case": "s",
                "output": {"type_name": "int"},
                "mutated_inputs": [],
                "aliases": [],
                "flag_changes": [],
                "evidence": {"programs": [[1, 2]]},
            },
            "pairs",
        ),
    ],
)
def test_replies_are_checked_against_their_schema(message, words):
    with pytest.raises(ProtocolError, match=words):
        M.parse_reply(message)


def test_a_valid_reply_parses_into_typed_fields():
    reply = M.parse_reply(
        {
            "kind": "case_done",
            "case": "seed42",
            "mutated_inputs": [],
            "aliases": [],
            "flag_changes": [],
            "evidence": {},
            "extra": "ignored",
            "output": {
                "type_name": "Tensor",
                "shape": [2, 3],
                "dtype": "float32",
                "ref": {"offset": 128, "shape": [2, 3], "dtype": "float32"},
            },
        }
    )
    out = reply.output
    assert isinstance(reply, M.CaseDone) and not hasattr(reply, "extra")
    assert out.shape == (2, 3) and out.ref == TensorRef(128, (2, 3), "float32")


def _session(arena: Arena, answer: dict) -> Session:
    link, other = _pair()

    def fake_worker():
        Link(other).receive(5.0)
        Link(other).send(answer)

    threading.Thread(target=fake_worker, daemon=True).start()
    return Session(link, arena, 0, 1024, 1024)


def test_a_reply_of_the_wrong_kind_or_pointing_outside_its_slot_ends_the_session():
    arena = Arena.create(4096)
    try:
        session = _session(arena, {"kind": "finished", "tampered": []})
        with pytest.raises(SessionLost, match="answered 'finished' where calls_done was due"):
            session.request({"kind": "calls", "first": 1}, 5.0, ("calls_done",))
        outside = M.OutputInfo("Tensor", (4,), "float32", TensorRef(0, (4,), "float32"))  # in the input region
        with pytest.raises(SessionLost, match="outside its slot"):
            session.read_output(outside)
        unlike = M.OutputInfo("Tensor", (8,), "float32", TensorRef(1024, (4,), "float32"))
        with pytest.raises(SessionLost, match="unlike the one it wrote"):
            session.read_output(unlike)
        inside = M.OutputInfo("Tensor", (4,), "float32", arena.put(1024, torch.arange(4.0)))
        got = session.read_output(inside)
        arena.put(1024, torch.zeros(4))  # later writes do not reach the copy
        assert torch.equal(got, torch.arange(4.0))
    finally:
        arena.close()


def test_a_silent_solution_process_times_out_on_the_supervisors_clock():
    arena = Arena.create(4096)
    link, _other = _pair()
    session = Session(link, arena, 0, 1024, 1024)
    with pytest.raises(SessionLost, match="timed out") as lost:
        session.request({"kind": "warmup"}, 0.05, ("warm",))
    assert lost.value.timed_out
    arena.close()


def test_a_watch_ends_a_wait_early(monkeypatch):
    monkeypatch.setattr(conversation, "WATCH_INTERVAL_S", 0.05)  # how often the watch is asked
    arena = Arena.create(4096)
    link, _other = _pair()
    session = Session(link, arena, 0, 1024, 1024, watch=lambda: "wrote more than 32 MiB to stdout/stderr")
    with pytest.raises(SessionLost, match="32 MiB"):
        session.request({"kind": "warmup"}, 30.0, ("warm",))
    arena.close()
