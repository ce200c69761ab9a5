"""The reference timed in the timer's own process (the trusted baseline child): `time_reference`,
the timing room's second entry, and the callers it times, the reference (eager, or compiled and
called as a user calls it) and its echo, gated exactly as a solution's call is.

`time_reference` times them on the same setup as a solution's calls (`rig.Rig`: the plan, the
decoy, the flush, fresh inputs) over buffers of its own, and reports `rig.Figures`. On CUDA the
call sits behind the gate (`GatedLocal`): its GPU work alone is in the window, whatever host work
it does. A reference that synchronises the host, and with `gate=False` (the compiled reference,
whose graph trees never answered a gate), is timed by events behind the flush and a device sleep
that hides its host work (`EventLocal`): its GPU work alone again, the record says which
(`method`).

- `GatedLocal`: arming enqueues, on a stream of its own, wait(GO >= seq) -> the call -> write
  (DONE = seq) (`protocol.gate`; the echo's, under MPS, the fused echo kernel alone; under the
  occupancy gate the wait is opened once HOLD has written the inputs, and HOLD, holding every
  SM, opens the window; the echo's is the held echo); the call's host work (Python, the compiled module's copy of new
  inputs into its static buffers, its graph launch) all happens while arming, so the window holds
  only its GPU work, copy included. A call that synchronises the host cannot sit behind a gate
  (it would wait for a GO that only comes after it returns): `gateable` finds that out first
  with torch's sync debug mode, and a watchdog opens the gate if a call still blocks. Under a
  graph gate (`protocol.gate_graph`) the call is captured once per set, as a solution's is, and
  held and closed by the same gated graph (`_graph_gated`), so both pay the same way from GO to
  DONE; a call that cannot be captured keeps the spin kernel.
- `EventLocal`: CUDA events around the call, queued behind the timer's flush and a device sleep
  long enough to hide the call's host work: its GPU work alone, the same definition the gate
  gives. For a reference that synchronises (the record says so), and for the compiled
  reference: `torch.compile(mode="reduce-overhead")`'s CUDA-graph trees behind a gate never
  wrote DONE on the H200 (a softmax), so its calls are queued behind a sleep instead.
- `HostLocal`: the CPU, the host's clock around the call (no performance figure).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from ...cases import single_output
from ...protocol.gate import Driver, GateWords, private_block
from ...protocol.gate_graph import GRAPH_GATES
from ...timed_calls import TimedCalls
from .errors import GateStuck, GateUnavailable
from .memory import TimedMemory, set_bytes
from .rig import Figures, Rig

CUDA_REGION_BYTES = 12 << 30  # the baseline's timing region, at most
CUDA_SETS = 4  # input sets, as the solution's timing region has
ARM_LIMIT_S = 10.0  # a call still arming after this long is waiting for the device: it synchronises
RING_LIMIT_S = 30.0  # a gated call that has not written DONE by then never will
HIDE_HOST_CYCLES = 4_000_000  # a device sleep of about 2 ms before an event-timed call


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
    def __init__(
        self,
        call: Callable[[int], Any],
        driver: Driver,
        clock: Callable[[], float] = time.perf_counter,
        spin: bool = False,
        fused_echo: bool = False,
        hold: Any = None,
    ):
        self.call, self.driver, self.clock, self.spin, self.fused_echo = call, driver, clock, spin, fused_echo
        self.graphs: list[int] = []  # under a graph gate, one gated graph a set (`_graph_gated`)
        self.graph_gate = "node"
        self.captured: Any = None  # what `graphs` were built from (`_graph_gated`)
        self.hold = hold  # the occupancy gate's HOLD (`protocol.hold.Hold`): it holds the call, GO is its own
        self._page, view, address = private_block()
        self.gate = GateWords(view)
        self.gate.register(driver, address)
        self.stream = torch.cuda.Stream()
        self.seq = 1

    def arm(self, set_index: int) -> float:
        seq, gate, hold = self.seq, self.gate, self.hold
        fired: list[bool] = []

        def open_gate() -> None:  # a call that synchronises waits for its own work: let it run
            fired.append(True)
            gate.go = seq
            if hold is not None:  # its kernels wait for HOLD too
                hold.release()

        watchdog = threading.Timer(ARM_LIMIT_S, open_gate)
        started = self.clock()
        watchdog.start()
        try:
            held = hold is not None
            if self.fused_echo:  # the echo's call: no work of its own (the fused or the held echo)
                gate.enqueue_echo(self.driver, self.stream, seq, held=held)
            elif self.graphs:  # its spin node reads the armed seq from the target word
                gate.target = seq
                done_in_graph = GRAPH_GATES[self.graph_gate].done_in_graph
                gate.enqueue_gated_graph(self.driver, self.stream, seq, self.graphs[set_index], done_in_graph)
            else:
                gate.enqueue(self.driver, self.stream, seq, lambda: self.call(set_index), spin=self.spin)
        finally:
            watchdog.cancel()
        if fired or gate.go >= seq:
            raise GateUnavailable("the call synchronised the host while it was being armed")
        return self.clock() - started

    def unblock(self) -> None:
        """Under a hold: open the armed call's stream wait (its kernels then wait for HOLD)."""
        self.gate.go = self.seq

    def ring(self) -> float:
        seq, gate, clock = self.seq, self.gate, self.clock
        self.seq += 1
        started = clock()
        if self.hold is not None:
            self.hold.go()  # the stream's wait was opened before the window (`unblock`)
        else:
            gate.go = seq
        spins = 0
        while gate.done < seq:
            spins += 1
            if spins % 65536 == 0 and clock() - started > RING_LIMIT_S:
                raise GateStuck(f"gated call {seq} never wrote DONE within {RING_LIMIT_S:.0f} s")
        return clock() - started


def _graph_gated(fn: Any, memory: TimedMemory, kind: str, caller: GatedLocal) -> GatedLocal:
    """Under the graph gate `kind`, `caller` with the reference's call captured once per set (as
    a solution's is, `TimedCalls`) and held and closed by the same gated graph as a solution's
    call; left as it is (the spin kernel ahead of the eager call) when the call cannot be
    captured or the driver refuses to build its gated graphs."""
    calls = TimedCalls(fn, memory.sets, memory.slots, copy_eager=False)
    if not calls.capture(keep_graphs=True):
        return caller
    gate = caller.gate
    try:
        graphs = [
            caller.driver.gated_graph(
                g.raw_cuda_graph(), gate.go_device, gate.target_device, kind=kind, done=gate.done_device
            )
            for g in calls.graphs
        ]
    except GateUnavailable:  # as the solution's worker does: the spin kernel holds the calls
        return caller
    caller.graphs = graphs
    caller.graph_gate, caller.captured = kind, calls  # the captures live as long as their gated graphs
    return caller


def gate_held_by(asked: str, caller: GatedLocal) -> str:
    """The gate that held the reference's calls, for its record: a graph gate only where its
    gated graphs were built, else the spin kernel that held them (`_graph_gated`)."""
    return "spin" if asked in GRAPH_GATES and not caller.graphs else asked


class EventLocal:
    """CUDA events around the call, behind the flush the timer queued before it and a device
    sleep that hides the call's host work."""

    def __init__(self, call: Callable[[int], Any], hide_host_cycles: int = HIDE_HOST_CYCLES):
        self.call, self.hide_host_cycles = call, hide_host_cycles
        self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.set_index = 0

    def arm(self, set_index: int) -> float:
        self.set_index = set_index
        return 0.0

    def ring(self) -> float:
        torch.cuda._sleep(self.hide_host_cycles)
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


def time_reference(
    fn: Any, module: Any, template: list[Any], device: str, seconds: float, gate: bool = True
) -> dict[str, Any]:
    """The reference's per-call time by the method solutions are timed by: one call at a time on
    new inputs written just before it, the L2 cleared, the echo's window subtracted, under the
    solutions' stopping rule (module docstring)."""
    out = single_output(fn(*template))
    per_set = set_bytes(template, out.numel() * out.element_size())
    count = int(max(1, min(CUDA_SETS if device == "cuda" else 2, CUDA_REGION_BYTES // per_set)))
    region = torch.empty(count * per_set, dtype=torch.uint8, device=device)
    memory = TimedMemory(region, template, out.shape, out.dtype, count)
    rig = Rig(memory, module, seconds, random.Random())

    def call(s: int) -> Any:
        return fn(*memory.sets[s])

    def echo(s: int) -> Any:
        rig.work.echo_graph.replay()

    started = time.perf_counter()
    method, why, held_by = "cpu", "", ""
    if device != "cuda":
        calls = rig.measure(HostLocal(call), HostLocal(lambda s: None), subtract_echo=False)
    else:
        method = "gated"
        try:
            if not gate:
                raise GateUnavailable("timed by events behind a device sleep (CUDA-graph trees behind a gate hang)")
            if not gateable(call):
                raise GateUnavailable("the reference synchronises the host (torch's sync debug mode)")
            driver = Driver()
            spin, fused = rig.gate in ("spin", *GRAPH_GATES), rig.echo in ("fused", "held")
            hold = rig.held.hold if rig.held is not None else None
            echo_caller = GatedLocal(echo, driver, spin=spin, fused_echo=fused, hold=hold)
            caller = GatedLocal(call, driver, spin=spin, hold=hold)
            if rig.gate in GRAPH_GATES:
                caller = _graph_gated(fn, memory, rig.gate, caller)
            held_by = gate_held_by(rig.gate, caller)
            calls = rig.measure(caller, echo_caller, held=hold is not None)
        except GateUnavailable as exc:
            torch.cuda.synchronize()
            method, why = "events", str(exc)
            calls = rig.measure(EventLocal(call), EventLocal(echo))
        finally:
            rig.close()
    gated = method == "gated"
    figures = Figures.of(calls, rig.work, method, held_by if gated else "", rig.echo if gated else "")
    return {
        "method": figures.method,
        "median_ms": figures.median_ms,
        "calls": figures.calls.to_dict(),
        "not_gated_because": why,
        "mps": figures.mps,
        "gate": figures.gate,
        "echo": figures.echo,
        "echo_window_ms": figures.echo_window_ms,
        "echo_call_ms": figures.echo_call_ms,
        "calls_s": round(time.perf_counter() - started, 3),
    }
