"""The output as it stood when DONE was written: the copy a judged timed call is judged on.

A solution's process can reach the gate's DONE word (it registered the doorbell block itself), so
its graph can write DONE before its work is done. What proves the work is the output: the timer
copies it at DONE and judges that copy, so work still writing the output after DONE leaves the
copy wrong (`timed_outputs`).

- **Under MPS** (`on_device=True`) the timer's context runs beside the solution's. Before each
  window the copy is queued on the timer's own stream behind wait(DONE >= seq), through the
  timer's own mapping of the same gate words: it starts on the GPU the moment DONE is written,
  beside whatever of the solution's work is still running, with no host in between.
- **Without MPS** a wait pending in the timer's context would put context switches into the
  window, so the host queues the copy once it sees DONE (`after_window`); the copy then runs only
  when the solution's context yields the GPU, and work past DONE is left to the gap check
  (docs/threat-model.md says what that leaves open).

The echo's turn copies as many bytes the same way, so the flushes after both windows stay alike.
`release()` ends every wait still queued (a window that never saw DONE) by writing DONE from the
host, so the timer's stream can never stay blocked behind a solution that went away, and drops
the timer's registration of the words: a registration outlives the arena's mapping, and a later
arena mapped at the same address must not inherit it (the H200 hung on exactly that: a wait
polling the previous arena's pages). Waiting for a copy is bounded (`COPY_WAIT_S`).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from ... import mps
from .errors import SnapshotLost

COPY_WAIT_S = 10.0  # the copy queued behind DONE runs within this once the host has seen DONE


class Snapshots:
    def __init__(self, on_device: bool, driver: Any = None):
        self.on_device, self.driver = on_device, driver
        self.copies: dict[bool, torch.Tensor] = {}  # echo? -> the last copy
        # A stream of its own, not one of torch's pooled streams: should a wait of it never be
        # satisfied, no other code of this process can be handed the blocked stream.
        self.stream = torch.cuda.ExternalStream(driver.create_stream()) if on_device else None
        self._mapped: dict[int, int] = {}  # id() of the gate words this context registered -> host address
        self._queued: dict[int, tuple[Any, int]] = {}  # id(gate) -> (gate, last seq waited on)

    def _target(self, echo: bool, source: torch.Tensor) -> torch.Tensor:
        if echo not in self.copies:
            self.copies[echo] = torch.empty_like(source)
        return self.copies[echo]

    def map_gate(self, gate: Any, host_address: int) -> None:
        """Register `gate`'s block (at `host_address` in this process) for this context."""
        if self.on_device and id(gate) not in self._mapped:
            gate.register(self.driver, host_address, fresh=True)
            self._mapped[id(gate)] = host_address

    def before_window(self, gate: Any, seq: int, source: torch.Tensor | None, echo: bool) -> None:
        """Under MPS: queue the copy behind wait(DONE >= seq) on the timer's stream."""
        if not self.on_device or source is None:
            return
        target = self._target(echo, source)
        self._queued[id(gate)] = (gate, seq)
        with torch.cuda.stream(self.stream):
            self.driver.wait_geq(self.stream, gate.done_device, seq)
            target.copy_(source, non_blocking=True)

    def after_window(self, source: torch.Tensor | None, echo: bool) -> None:
        """Without MPS: queue the copy now that the host saw DONE. Under MPS: have the timer's
        next work (the flush after the window) wait for the copy queued before it."""
        if source is None:
            return
        if self.on_device:
            self._wait_for_copy()
            return
        self._target(echo, source).copy_(source, non_blocking=True)

    def _wait_for_copy(self, clock=time.perf_counter) -> None:
        """Until the copy queued behind DONE has run, at most COPY_WAIT_S (never a blocking
        synchronise: a wait that could not be satisfied would hang the timer)."""
        done = torch.cuda.Event()
        done.record(self.stream)
        deadline = clock() + COPY_WAIT_S
        while not done.query():
            if clock() > deadline:
                raise SnapshotLost(
                    f"the copy of the output queued behind DONE did not run within {COPY_WAIT_S:g} s", timed_out=True
                )
            time.sleep(0)

    def output(self) -> torch.Tensor | None:
        """The last copy of the solution's output (not the echo's), or None."""
        return self.copies.get(False)

    def release(self) -> None:
        """Write DONE = seq from the host for every wait queued (whatever the solution left in the
        word: a value the device's cyclic comparison reads as not yet would hold the wait), let
        the stream drain, then drop the registrations. If it still does not drain, the stream
        stays blocked on words it polls: the registrations are kept (dropping them under a
        pending wait would fault the context) and this process is marked unfit for further
        CUDA evaluations (`mps.mark_context_unusable`), so a worker retires."""
        for gate, seq in self._queued.values():
            gate.done = seq
        self._queued.clear()
        if self.stream is not None:
            try:
                self._wait_for_copy()
            except SnapshotLost as exc:
                mps.mark_context_unusable(f"a copy queued behind DONE never ran ({exc.reason})")
                raise
        for address in self._mapped.values():
            self.driver.unregister(address)
        self._mapped.clear()
