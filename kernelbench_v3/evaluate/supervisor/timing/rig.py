"""One timing's setup and its summary, the same for a solution and for its baseline.

Both entries of the timing room (`time_solution`, `time_reference`) build a `Rig` over the memory
their caller reads (`memory.TimedMemory`) and time through it, so the two sides cannot drift:

- `work`: the timer's own device work (`device_work.DeviceWork`: the flush, the echo call);
- `decoy`: one input set in memory only the timer reaches, which the echo's call gets the same
  write into;
- `feed`: fresh inputs from the problem's own `get_inputs()` under seeds the caller never learns;
- `plan`: when to stop (`stats.CallPlan.for_device`, the solutions' stopping rule);
- `held`: the occupancy gate's turns (`held.HeldTurns`) when the gate is "hold".

They are made in that order, the order the solution's timing made them in before the two sides
shared this setup.

`Figures` is what one timing says on either side: the net times summarised (`stats`), the
method, the echo's window and call, and whether MPS was in use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ... import mps
from ...protocol.gate import GateUnavailable, echo_kind, gate_kind
from .device_work import DeviceWork
from .held import HeldTurns
from .measure import Caller, CallTimes, Feed, measure
from .memory import TimedMemory, fresh_inputs, set_bytes
from .stats import CallPlan, CallSummary, summarize


@dataclass(frozen=True)
class Figures:
    """One timing's figures, in the form both sides report."""

    method: str
    calls: CallSummary  # the net times
    echo_window_ms: float  # the median echo window (subtracted on CUDA)
    echo_call_ms: float  # one replay of the echo's graph by events (kept as evidence)
    mps: bool
    gate: str = ""  # how the gated calls held at GO: "spin", "wait", "node" or "hold" (`protocol.gate`); "" ungated
    echo: str = ""  # what the echo's gated call was: "fused", "graph" or "held" (`protocol.gate.echo_kind`)

    @classmethod
    def of(cls, calls: CallTimes, work: DeviceWork, method: str, gate: str = "", echo: str = "") -> Figures:
        """The figures of `calls` (ValueError when no call was scored)."""
        return cls(
            method=method,
            calls=summarize(calls.nets),
            echo_window_ms=summarize(calls.echo_windows).median_s * 1e3,
            echo_call_ms=work.echo_call_s * 1e3,
            mps=work.cuda and mps.in_use(),
            gate=gate,
            echo=echo,
        )

    @property
    def median_ms(self) -> float:
        return self.calls.median_s * 1e3


class Rig:
    """What a caller is timed on: its memory, the decoy, the timer's device work, the feed and
    the plan (module docstring)."""

    def __init__(self, memory: TimedMemory, module: Any, seconds: float, rng: Any):
        device = "cuda" if memory.region.is_cuda else "cpu"
        self.memory, self.device, self.rng = memory, device, rng
        self.work = DeviceWork(device, memory.out_nbytes)
        self.gate = gate_kind(mps.in_use()) if device == "cuda" else ""  # one choice per timing
        self.echo = echo_kind(mps.in_use()) if device == "cuda" else ""
        nbytes = set_bytes(memory.template, memory.out_nbytes)
        region = torch.empty(nbytes, dtype=torch.uint8, device=memory.region.device)
        self.decoy = TimedMemory(region, memory.template, memory.out_shape, memory.out_dtype, 1)
        self.feed = Feed(
            memory.count,
            lambda: fresh_inputs(module, device, rng.getrandbits(62)),
            memory.write,
            lambda inputs: self.decoy.write(0, inputs),
        )
        self.plan = CallPlan.for_device(device, seconds)
        # The occupancy gate's HOLD (`held`), under KBV3_GATE=hold on CUDA under MPS only; a
        # context that cannot run it times by the spin and the fused echo instead (the record
        # says which).
        self.held = None
        if self.gate == "hold":
            try:
                self.held = HeldTurns(self.decoy, memory, self.work)
            except GateUnavailable:
                self.gate, self.echo = "spin", "fused"

    def measure(self, caller: Caller, echo: Caller, held: bool = False, **how: Any) -> CallTimes:
        """`caller` timed one call per window against `echo` on this rig (`measure.measure`;
        `held`: through the occupancy gate's HOLD, for gated callers; `how`: its `judge`,
        `subtract_echo` and `clock`)."""
        turns = self.held if held else None
        return measure(caller, echo, self.feed, self.work, self.plan, self.rng, held=turns, **how)

    def close(self) -> None:
        """Drop what the rig holds outside torch (HOLD's words)."""
        if self.held is not None:
            self.held.close()
            self.held = None
