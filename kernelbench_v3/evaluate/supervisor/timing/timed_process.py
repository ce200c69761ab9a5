"""One timed process (the solution's or the trusted echo's) as the timer holds it: its whole
conversation about timed calls, so the timing room never talks to a session itself.

`prepare` sends the layout of the timing region (`messages.PrepareTiming`), `capture` has the
process capture one CUDA graph per input set, `start` sends `messages.Calls` and leaves the
process serving its doorbell (`doorbell`), `stop` ends that loop and `finish` the process (the
echo's). Each call has two steps, and the timer writes the call's inputs between them:

- `arm(set)`: the timer names the set, resumes this process alone (the rest of the solution's
  side stays stopped) and waits for ARMED; then it stops the whole side again (`Session.pause`,
  which also proves every process stopped). Gated (a captured CUDA graph): the process has
  enqueued wait(GO >= seq) -> its graph for that set -> write(DONE = seq) and runs no more host
  code until the next arming. Rung (the CPU, a forward CUDA graphs cannot capture, the evidence
  call): the process polls GO on the host.
- `ring()`: the window, by the timer's clock. Gated: from the host's write of the gate's GO to
  seeing its DONE; the process stays stopped throughout, so nothing of its host side runs inside
  the window. Held (`start(hold=...)`, the occupancy gate): the call's stream wait is opened by
  `unblock` once the timer's HOLD has written the inputs, its kernels then wait for HOLD, and
  GO is HOLD's own word, which this process cannot reach (`protocol.hold`). Rung: GO is written and the process resumed; it runs the call, synchronises and
  writes DONE; it is stopped again afterwards.

Nothing here trusts the process: the words it writes can only delay its own window or, past the
deadline of the timer's clock, end the session (`SessionLost`). A gate found already open or
already done before the timer rings it is `GateTampered`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from ...process_tree import alive
from ...protocol.channel import TensorRef
from ...protocol.doorbell import ARMED, DONE, GO, NBYTES, SET, STOP_SET, WAKE, Doorbell, DoorbellTimeout
from ...protocol.gate import GateWords
from ...protocol.messages import Calls, CallsDone, Capture, Failed, Finish, PrepareTiming, TimingReady
from ..session import Session, SessionLost
from .errors import GateTampered

CPU_SPIN_S, CPU_SLEEP_S = 0.0005, 0.0001  # CPU hosts may be oversubscribed: poll politely
ALIVE_EVERY = 1 << 16  # gate spins between asking whether the process still exists
DOORBELL_OFFSET = 0  # the doorbell's words lead every arena; requests' inputs follow at ALIGN
FINISH_LIMIT_S = 10.0  # the echo's goodbye


class TimedProcess:
    def __init__(
        self,
        session: Session,
        bell: Doorbell,
        gate: GateWords | None,
        timeout_s: float,
        cuda: bool,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self.session, self.bell, self.gate, self.timeout_s, self.clock = session, bell, gate, timeout_s, clock
        self.seq = 1
        self.gated = False
        self.hold: Any = None  # the timer's HOLD that opens a held call's window (`protocol.hold.Hold`)
        self.spin = {"spin_s": timeout_s} if cuda else {"spin_s": CPU_SPIN_S, "sleep_s": CPU_SLEEP_S}

    @classmethod
    def of(
        cls, session: Session, timeout_s: float, cuda: bool, clock: Callable[[], float] = time.perf_counter
    ) -> TimedProcess:
        """The process behind `session`, rung through the doorbell that leads its arena."""
        bell = Doorbell(session.arena.view(TensorRef(DOORBELL_OFFSET, (NBYTES,), "uint8")))
        return cls(session, bell, bell.gate_words(), timeout_s, cuda, clock)

    def view(self, offset: int, nbytes: int) -> torch.Tensor:
        """`nbytes` of the process's arena from `offset`, as flat bytes the timer writes."""
        return self.session.arena.view(TensorRef(offset, (nbytes,), "uint8"))

    def prepare(self, region: dict[str, Any], layout: dict[str, Any]) -> None:
        """Tell the process where the timing region is and how its sets and slots lie."""
        reply, _ = self.session.request(
            PrepareTiming(region, layout, DOORBELL_OFFSET), self.timeout_s, ("timing_ready",)
        )
        if isinstance(reply, Failed):
            raise SessionLost(f"preparing the timed calls failed: {reply.error[:500]}")

    def capture(self, timeout_s: float, keep_graphs: bool = False) -> TimingReady:
        """Have the process capture one CUDA graph per input set (they may compile)."""
        reply, _ = self.session.request(Capture(keep_graphs), timeout_s, ("timing_ready",))
        if isinstance(reply, Failed):
            raise SessionLost(f"capturing the timed calls failed: {reply.error[:500]}")
        return reply

    def finish(self) -> None:
        """Let the process go (the echo's end; the solution's is the evaluation's)."""
        try:
            self.session.request(Finish(), FINISH_LIMIT_S, ("finished",))
        except SessionLost:
            pass

    def _alive(self) -> bool:
        return self.session.pid <= 0 or alive(self.session.pid)  # the zygote's child, not ours

    def _lost(self, what: str, detail: str = "") -> SessionLost:
        gone = not self._alive()
        return SessionLost(
            f"the solution process exited or was killed during {what}"
            if gone
            else f"timed out: {what} did not answer within {self.timeout_s:.0f} s {detail}".rstrip(),
            timed_out=not gone,
        )

    def _wait(self, word: int, value: int, what: str) -> None:
        try:
            self.bell.wait(word, value, self.timeout_s, clock=self.clock, alive=self._alive, **self.spin)
        except DoorbellTimeout as exc:
            raise self._lost(what, f"({exc})") from None

    def start(
        self,
        gated: bool,
        evidence: bool = False,
        spin_gate: bool = False,
        fused_echo: bool = False,
        spin_node: bool = False,
        hold: Any = None,
        graph_gate: str = "node",
    ) -> None:
        """Send the process into its calls loop: gated (captured graphs behind the gate, held at
        GO by the spin kernel if `spin_gate`, by a spin node heading each graph if `spin_node`
        (the graph shaped as `graph_gate` says, `protocol.gate_graph`),
        by the timer's `hold` (`protocol.hold.Hold`) if given, behind the stream's wait that
        `unblock` opens before GO;
        the echo's calls the fused echo kernel alone if `fused_echo`, the held echo under a
        hold) or rung by the host."""
        self.bell.reset()
        if self.gate is not None:
            self.gate.go = self.gate.done = self.seq - 1
        self.gated = gated and self.gate is not None
        self.hold = hold if self.gated else None
        self.session.resume()
        g, h = self.gated, self.hold is not None
        calls = Calls(
            self.seq, evidence, g, g and spin_gate and not h, g and fused_echo, g and spin_node, h, graph_gate
        )
        self.session.send(calls)

    def arm(self, set_index: int) -> float:
        """Have the process arm call `seq` on set `set_index`; seconds from its resume to ARMED.
        Returns with the whole solution's side stopped."""
        seq = self.seq
        self.bell.write(SET, set_index)
        self.bell.write(WAKE, seq)
        started = self.clock()
        self.session.resume()
        self._wait(ARMED, seq, f"timed call {seq} (arming)")
        armed = self.clock() - started
        self.session.pause()
        if self.gated and (self.gate.go >= seq or self.gate.done >= seq):
            raise GateTampered(f"call {seq}: the gate read GO {self.gate.go}, DONE {self.gate.done} before it was rung")
        return armed

    def unblock(self) -> None:
        """Under a hold: open the armed call's stream wait before its window, once the inputs are
        written (copies in its graph then read them); its kernels still wait for HOLD's GO."""
        self.gate.go = self.seq

    def ring(self) -> float:
        """The window of the armed call, in seconds of the timer's clock."""
        seq = self.seq
        self.seq += 1
        if self.gated:
            return self._ring_gate(seq)
        started = self.clock()
        self.bell.write(GO, seq)
        self.session.resume()
        self._wait(DONE, seq, f"timed call {seq}")
        window = self.clock() - started
        self.session.pause()
        return window

    def _ring_gate(self, seq: int) -> float:
        gate, clock = self.gate, self.clock
        started = clock()
        if self.hold is not None:
            self.hold.go()  # the stream's wait was opened before the window (`unblock`)
        else:
            gate.go = seq
        spins = 0
        while gate.done < seq:
            spins += 1
            if spins % ALIVE_EVERY == 0:
                if clock() - started > self.timeout_s:
                    raise self._lost(f"timed call {seq}", "(its gated work never wrote DONE)")
        return clock() - started

    def stop(self) -> CallsDone:
        """End the process's loop; its reply."""
        self.bell.write(SET, STOP_SET)
        self.bell.write(WAKE, self.seq)
        self.session.resume()
        reply = self.session.receive_reply(self.timeout_s, ("calls_done",))
        if isinstance(reply, Failed):
            raise SessionLost(f"the timed calls failed: {reply.error[:500]}")
        return reply
