"""Callers in the timer's own process, for the trusted baseline child: the reference (eager, or
compiled and called as a user calls it) and its echo, gated exactly as a solution's call is.

- `GatedLocal`: arming enqueues, on a stream of its own, wait(GO >= seq) -> the call -> write
  (DONE = seq) (`protocol.gate`); the call's host work (Python, the compiled module's copy of new
  inputs into its static buffers, its graph launch) all happens while arming, so the window holds
  only its GPU work, copy included. A call that synchronises the host cannot sit behind a gate
  (it would wait for a GO that only comes after it returns): `gateable` finds that out first
  with torch's sync debug mode, and a watchdog opens the gate if a call still blocks.
- `EventLocal`: CUDA events around the call, queued behind the timer's flush: for a reference
  that synchronises (the record says so).
- `HostLocal`: the CPU, the host's clock around the call (no performance figure).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from ...protocol.gate import Driver, GateUnavailable, GateWords, private_block

ARM_LIMIT_S = 10.0  # a call still arming after this long is waiting for the device: it synchronises


def gateable(call: Callable[[int], Any]) -> bool:
    """Whether `call(0)` runs without synchronising the host (torch's sync debug mode)."""
    previous = torch.cuda.get_sync_debug_mode()
    try:
        torch.cuda.set_sync_debug_mode("error")
        call(0)
    except RuntimeError:
        return False
    finally:
        torch.cuda.set_sync_debug_mode(previous)
        torch.cuda.synchronize()
    return True


class GatedLocal:
    def __init__(self, call: Callable[[int], Any], driver: Driver, clock: Callable[[], float] = time.perf_counter):
        self.call, self.driver, self.clock = call, driver, clock
        self._page, view, address = private_block()
        self.gate = GateWords(view)
        self.gate.register(driver, address)
        self.stream = torch.cuda.Stream()
        self.seq = 1

    def arm(self, set_index: int) -> float:
        seq, gate = self.seq, self.gate
        watchdog = threading.Timer(ARM_LIMIT_S, lambda: setattr(gate, "go", seq))
        started = self.clock()
        watchdog.start()
        try:
            gate.enqueue(self.driver, self.stream, seq, lambda: self.call(set_index))
        finally:
            watchdog.cancel()
        if gate.go >= seq:
            raise GateUnavailable("the call synchronised the host while it was being armed")
        return self.clock() - started

    def ring(self) -> float:
        seq, gate, clock = self.seq, self.gate, self.clock
        self.seq += 1
        started = clock()
        gate.go = seq
        while gate.done < seq:
            pass
        return clock() - started


class EventLocal:
    """CUDA events around the call, behind the flush the timer queued before it."""

    def __init__(self, call: Callable[[int], Any]):
        self.call = call
        self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.set_index = 0

    def arm(self, set_index: int) -> float:
        self.set_index = set_index
        return 0.0

    def ring(self) -> float:
        self.start.record()
        self.call(self.set_index)
        self.end.record()
        self.end.synchronize()
        return self.start.elapsed_time(self.end) * 1e-3


class HostLocal:
    """The host's clock around the call (the CPU)."""

    def __init__(self, call: Callable[[int], Any], clock: Callable[[], float] = time.perf_counter):
        self.call, self.clock = call, clock
        self.set_index = 0

    def arm(self, set_index: int) -> float:
        self.set_index = set_index
        return 0.0

    def ring(self) -> float:
        started = self.clock()
        self.call(self.set_index)
        return self.clock() - started
