"""The supervisor's side of one process's one-call windows (the solution's or the echo's).

`start` sends `messages.Calls` and leaves the process serving its doorbell (`doorbell`); each
`call(set)` then reads its own clock, wakes and resumes that process alone (the rest of the
solution's side stays stopped), waits until it is armed, rings, waits for DONE and reads its
clock again: the window. No work of the supervisor's own runs on the GPU inside a window. It stops the process again before
returning, so nothing of it runs while the supervisor writes the next call's inputs. `stop` ends
the loop and collects the process's `calls_done` reply (its own per-call figures: evidence).

Nothing here trusts the process: the words it writes can only delay its own window or, past the
deadline of the supervisor's clock, end the session (`SessionLost`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ..protocol.doorbell import ARMED, DONE, GO, SET, WAKE, Doorbell, DoorbellTimeout
from ..protocol.messages import Calls, CallsDone, Failed
from .device_work import DeviceWork
from .session import Session, SessionLost

CPU_SPIN_S, CPU_SLEEP_S = 0.0005, 0.0001  # CPU hosts may be oversubscribed: poll politely


def running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie (it is the zygote's child, not ours)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


class CallSide:
    def __init__(
        self,
        session: Session,
        bell: Doorbell,
        work: DeviceWork,
        timeout_s: float,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self.session, self.bell, self.work, self.timeout_s, self.clock = session, bell, work, timeout_s, clock
        self.seq = 1
        self.serving = False
        self.spin = {"spin_s": timeout_s} if work.cuda else {"spin_s": CPU_SPIN_S, "sleep_s": CPU_SLEEP_S}

    def _alive(self) -> bool:
        return self.session.pid <= 0 or running(self.session.pid)

    def _wait(self, word: int, value: int, what: str) -> None:
        try:
            self.bell.wait(word, value, self.timeout_s, clock=self.clock, alive=self._alive, **self.spin)
        except DoorbellTimeout as exc:
            gone = not self._alive()
            raise SessionLost(
                f"the solution process exited or was killed during {what}"
                if gone
                else f"timed out: {what} did not answer within {self.timeout_s:.0f} s ({exc})",
                timed_out=not gone,
            ) from None

    def start(self, evidence: bool = False) -> None:
        self.bell.reset()
        self.session.resume()
        self.session.send(Calls(self.seq, evidence))
        self.serving = True

    def call(self, set_index: int) -> tuple[float, float]:
        """One window on input set `set_index`: (seconds from resuming the process to seeing
        DONE, seconds from ringing GO to seeing DONE), both by the supervisor's clock.

        The window is the second; the difference is waking the process and switching the GPU
        to its context, which `clock` holds to the echo's (the call's inputs are in memory
        from the resume on: work done there is off the window)."""
        seq = self.seq
        self.bell.write(SET, set_index)
        self.bell.write(WAKE, seq)
        started = self.clock()
        self.session.resume()
        self._wait(ARMED, seq, f"timed call {seq} (arming)")
        rung = self.clock()
        self.bell.write(GO, seq)
        self._wait(DONE, seq, f"timed call {seq}")
        done = self.clock()
        self.session.pause()
        self.seq += 1
        return done - started, done - rung

    def stop(self) -> CallsDone:
        """End the process's loop; its reply."""
        self.bell.write(GO, -self.seq)
        self.bell.write(WAKE, self.seq)
        self.session.resume()
        self.serving = False
        reply = self.session.receive_reply(self.timeout_s, ("calls_done",))
        if isinstance(reply, Failed):
            raise SessionLost(f"the timed calls failed: {reply.error[:500]}")
        return reply
