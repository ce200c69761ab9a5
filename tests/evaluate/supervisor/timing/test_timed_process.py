"""`TimedProcess`: one object holds a timed process's whole conversation (prepare, capture,
start, arm, ring, stop, finish), over a session the test stands in for."""

from __future__ import annotations

import pytest
import torch

from kernelbench_v3.evaluate.protocol.channel import TensorRef
from kernelbench_v3.evaluate.protocol.messages import Capture, Failed, Finish, PrepareTiming, TimingReady
from kernelbench_v3.evaluate.supervisor.session import SessionLost
from kernelbench_v3.evaluate.supervisor.timing.timed_process import DOORBELL_OFFSET, FINISH_LIMIT_S, TimedProcess


class _Arena:
    def __init__(self, nbytes=4096):
        self.memory = torch.zeros(nbytes, dtype=torch.uint8)

    def view(self, ref: TensorRef) -> torch.Tensor:
        return self.memory[ref.offset : ref.offset + ref.shape[0]]


class _Session:
    """Answers each request with the next of `replies` (an exception is raised instead)."""

    pid = 0

    def __init__(self, *replies):
        self.arena, self.replies, self.asked = _Arena(), list(replies), []

    def request(self, message, timeout_s, expect):
        self.asked.append((message, timeout_s, expect))
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply, 0.0


def test_the_doorbell_leads_the_arena_and_views_are_the_arenas_bytes():
    session = _Session()
    process = TimedProcess.of(session, 5.0, cuda=False)
    assert process.bell.address == session.arena.memory[DOORBELL_OFFSET:].data_ptr()
    process.bell.write(0, 7)
    assert int(session.arena.memory[:8].view(torch.int64)[0]) == 7
    view = process.view(1024, 256)
    assert view.numel() == 256 and view.data_ptr() == session.arena.memory[1024:].data_ptr()


def test_prepare_and_capture_speak_for_the_timing_phase():
    ready = TimingReady(graphs=True, detail="", evidence={}, outputs=[])
    session = _Session(TimingReady(graphs=False, detail="", evidence={}, outputs=[]), ready)
    process = TimedProcess.of(session, 5.0, cuda=True)
    process.prepare({"arena": [64, 128]}, {"sets": [], "slots": []})
    assert process.capture(42.0) is ready
    (prepared, prepare_s, prepare_expect), (captured, capture_s, _) = session.asked
    assert prepared == PrepareTiming({"arena": [64, 128]}, {"sets": [], "slots": []}, DOORBELL_OFFSET)
    assert prepare_s == 5.0 and prepare_expect == ("timing_ready",)  # the process's own limit
    assert captured == Capture() and capture_s == 42.0
    assert not captured.keep_graphs  # a graph is kept past its capture only for a spin node


def test_capture_keeps_the_graphs_when_a_spin_node_will_head_them():
    ready = TimingReady(graphs=True, detail="", evidence={}, outputs=[])
    session = _Session(ready)
    TimedProcess.of(session, 5.0, cuda=True).capture(9.0, keep_graphs=True)
    assert session.asked[0][0] == Capture(keep_graphs=True)


def test_a_failed_prepare_or_capture_ends_the_session():
    process = TimedProcess.of(_Session(Failed("timing", "no such region")), 5.0, cuda=False)
    with pytest.raises(SessionLost, match="preparing the timed calls failed: no such region"):
        process.prepare({}, {})
    process = TimedProcess.of(_Session(Failed("timing", "capture broke")), 5.0, cuda=True)
    with pytest.raises(SessionLost, match="capturing the timed calls failed: capture broke"):
        process.capture(1.0)


def test_finish_lets_the_echo_go_even_when_it_is_gone():
    session = _Session(SessionLost("the echo exited"))
    TimedProcess.of(session, 5.0, cuda=False).finish()  # no exception: the echo's end is best effort
    assert session.asked == [(Finish(), FINISH_LIMIT_S, ("finished",))]


def test_start_asks_for_the_spin_gate_only_for_gated_calls():
    from kernelbench_v3.evaluate.protocol.messages import Calls

    class _Sent(_Session):
        def resume(self):
            pass

        def send(self, message):
            self.asked.append(message)

    session = _Sent()
    process = TimedProcess.of(session, 5.0, cuda=True)
    process.start(gated=True, spin_gate=True)
    process.start(gated=False, spin_gate=True)  # rung by the host: nothing to hold at GO
    process.start(gated=True)
    process.start(gated=True, spin_gate=True, fused_echo=True)  # the echo under MPS
    process.start(gated=False, fused_echo=True)  # rung: no fused echo either
    process.start(gated=True, spin_node=True)
    assert session.asked == [
        Calls(1, False, True, True),
        Calls(1, False, False, False),
        Calls(1, False, True, False),
        Calls(1, False, True, True, True),
        Calls(1, False, False, False, False),
        Calls(1, False, True, False, False, True),
    ]


class _Hold:
    def __init__(self):
        self.opened = 0

    def go(self):
        self.opened += 1


class _Resumable(_Session):
    def resume(self):
        pass

    def pause(self):
        pass

    def send(self, message):
        self.asked.append(message)


def test_a_held_call_waits_on_its_stream_until_unblocked_and_is_rung_by_the_holds_go():
    from kernelbench_v3.evaluate.protocol.doorbell import ARMED
    from kernelbench_v3.evaluate.protocol.messages import Calls

    session, hold = _Resumable(), _Hold()
    process = TimedProcess.of(session, 5.0, cuda=True)
    process.start(gated=True, spin_gate=True, hold=hold)  # the spin gives way to the stream's wait
    assert session.asked == [Calls(1, False, True, False, False, False, True)]
    process.bell.write(ARMED, 1)
    process.arm(0)
    assert process.gate.go == 0  # armed: the stream's wait still shut
    process.unblock()  # the inputs are written: copies in the graph may read them
    assert process.gate.go == 1 and hold.opened == 0  # ...but no kernel runs before HOLD's GO
    process.gate.done = 1  # the call's DONE (a real GPU writes it once HOLD has let go)
    process.ring()
    assert hold.opened == 1
    process.start(gated=False, hold=hold)  # rung by the host: no hold
    assert process.hold is None and session.asked[-1].held is False


def test_under_a_hold_done_written_before_the_ring_is_still_tampering():
    from kernelbench_v3.evaluate.protocol.doorbell import ARMED
    from kernelbench_v3.evaluate.supervisor.timing.errors import GateTampered

    session = _Resumable()
    process = TimedProcess.of(session, 5.0, cuda=True)
    process.start(gated=True, hold=_Hold())
    process.bell.write(ARMED, 1)
    process.gate.done = 1
    with pytest.raises(GateTampered):
        process.arm(0)
