"""Every way a timing can end other than with figures, in one place.

- `TimingUnavailable`: the problem itself cannot be timed this way; the verdict stands and the
  record says why it was not timed.
- `GateTampered`: a gate read open or done before the timer rang it (`timing_gap` fails).
- `GateStuck`: a gated call of the timer's own process never wrote DONE (the baseline child).
- `SnapshotLost`: the copy queued behind DONE never ran; the session ends, timed out.
- `GateUnavailable` (the protocol's: the solution process raises it too): a call cannot sit
  behind a gate, or this context cannot map the gate's words; the caller falls back.
"""

from __future__ import annotations

from ...protocol.gate import GateUnavailable
from ..session import SessionLost

__all__ = ["GateStuck", "GateTampered", "GateUnavailable", "SnapshotLost", "TimingUnavailable"]


class TimingUnavailable(Exception):
    """The problem itself cannot be timed this way (its inputs change shape between draws, say):
    the evaluation keeps its verdict and says why it was not timed."""


class GateTampered(Exception):
    """The gate's words said open or done before the timer rang it: something of the caller's
    wrote them outside the gated call."""


class GateStuck(RuntimeError):
    """A gated call never wrote DONE: its stream waits on something that will not come."""


class SnapshotLost(SessionLost):
    """The copy queued behind DONE never ran although the host saw DONE: the evaluation ends as a
    lost session (timed out), never as a hang."""
