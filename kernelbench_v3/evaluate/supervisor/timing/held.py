"""The occupancy gate's turn in `measure`: the timer's HOLD takes every SM, the caller arms,
HOLD writes the call's inputs and clears the L2, and GO is HOLD's own word (`protocol.hold`).

Per call the timer first writes the new inputs into its stage (the rig's decoy, memory only the
timer reaches); then, for the echo and for the caller alike, `turn` launches HOLD with a copy of
the stage's input bytes into where that call reads them (a buffer of the timer's for the echo,
the chosen set for the caller), waits until HOLD holds every SM (ARMED), arms the caller (its
call behind its stream's wait, as without a hold), has HOLD write and flush (PREP to PREPPED,
the `prep` the witness compares), then opens the caller's stream wait (`unblock`) and lets it
settle: a copy node in the call's graph, which needs no SM, runs now on the new inputs, and its
kernels wait in the hardware's queue behind HOLD. The caller's `ring` then writes HOLD's GO. So
both windows hold the same steps, and both preps move the same bytes.

A kernel of the caller's still resident when HOLD is launched keeps it from taking every SM:
`HoldRefused`, which `measure` reports as a busy GPU (`gpu_busy`, a `timing_gap` failure).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from ... import mps
from ...protocol.gate import Driver
from ...protocol.hold import Hold
from .device_work import DeviceWork
from .memory import TimedMemory

HOLD_LIMIT_S = 120.0  # HOLD's own bound; the timer releases it sooner, whatever happens
# Between opening the call's stream wait and GO: a wait woke a call 9 or 16 us after its word
# under MPS on the H200 (docs/timing.md), and its kernels must be queued behind HOLD by GO.
UNBLOCK_SETTLE_S = 50e-6


class HeldTurns:
    def __init__(self, stage: TimedMemory, memory: TimedMemory, work: DeviceWork, hold: Any = None):
        self.stage, self.memory, self.work = stage, memory, work
        self.hold = hold if hold is not None else Hold(Driver(), HOLD_LIMIT_S)
        offset, self.nbytes = stage.input_span(0)
        self.source = stage.region.data_ptr() + offset
        self.echo_target = torch.empty(max(16, self.nbytes), dtype=torch.uint8, device=stage.region.device)

    def turn(self, caller: Any, set_index: int, echo: bool) -> tuple[float, float]:
        """(seconds to arm the caller, seconds HOLD took to write the inputs and flush)."""
        if echo:
            target = self.echo_target.data_ptr()
        else:
            offset, nbytes = self.memory.input_span(set_index)
            if nbytes != self.nbytes:  # never: one template lays out every set alike
                raise ValueError(f"set {set_index} holds {nbytes} input bytes, the stage {self.nbytes}")
            target = self.memory.region.data_ptr() + offset
        flush, dirty = self.work.flush_ranges()
        self.hold.take(self.source, target, self.nbytes, flush, dirty)
        arm = caller.arm(set_index)
        prep = self.hold.prepare()
        caller.unblock()  # the call's stream wait opens now, with its inputs written
        settle = time.perf_counter() + UNBLOCK_SETTLE_S
        while time.perf_counter() < settle:
            pass
        return arm, prep

    def release(self) -> None:
        """Let HOLD go (after the last call, or when timing ends early)."""
        self.hold.release()

    def close(self) -> None:
        """Drop HOLD's words; a HOLD that has not ended (another process's kernel kept some of
        its blocks out) leaves this process unfit for more CUDA evaluations, as a copy queued
        behind a DONE that never came does (`mps.mark_context_unusable`): a worker retires."""
        if not self.hold.close():
            mps.mark_context_unusable("the occupancy gate's HOLD had not ended when its timing did")
