"""Timing a solution by the supervisor's clock: one call per window, its inputs written just
before it, its output read where the call left it.

The scored time never comes from a figure the solution process reports. For every timed call
the supervisor:

1. draws new inputs with the problem's own `get_inputs()` under a seed the solution process
   never learns and writes them into one of the input sets of its timing region
   (`timed_memory`), only after the previous call's window has closed: no call can see another
   call's inputs, so batching or precomputing across calls is impossible by construction;
2. clears the L2 with its own kernel (`device_work`), so every call starts cold;
3. runs one call of the trusted echo (a process forked from the same zygote whose call is one
   tiny kernel) and then the solution's call, each as a window of its own (`call_side`): the
   process is resumed, makes its GPU context the active one and arms; the window runs from
   ringing the doorbell to seeing DONE; the call's net time is its window less the echo's (plus
   the echo kernel's own duration). Arming must take what the echo's arming takes (give or
   take noise): work done before the window opens fails (`work_before_window`);
4. times a flush of its own right after each of the two windows, from its call until the device
   has run it: a flush after the solution's call that takes longer than one after the echo's
   means the solution's work was still running past DONE (`gap_work`);
5. reads the output in place (the graph's output through CUDA IPC, or the set's slot) after the
   window has closed, at random and only after the call has answered, and judges it exactly as a
   correctness case (`Verifier`: tolerance, the float64 precision rule, dtype, finiteness).

Between windows every process of the solution's side is stopped (`Session.pause`). The score is
the median of the net times, with its confidence interval; timing stops by `call_stats`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..protocol.doorbell import Doorbell
from ..protocol.messages import Capture, Failed, PrepareTiming, TimingReady
from .call_side import CallSide
from .call_stats import CallPlan, should_stop, summarize
from .checks import compare_case
from .device_work import DeviceWork
from .session import Session, SessionLost
from .timed_memory import TimedMemory, TimingUnavailable, fresh_inputs

METHOD = {
    "graphs": "supervisor_calls_cuda_graphs",
    "eager": "supervisor_calls_cuda_eager",
    "cpu": "supervisor_calls_cpu",
}
GAP_WORK = "gap_work"
WORK_BEFORE_WINDOW = "work_before_window"
WARM_CALLS = 3  # per side, before any call is scored (first replays, page faults)
MAX_VERIFIED = 64  # timed outputs judged per evaluation, at most
MIN_VERIFY_SHARE = 0.1  # every call is judged with at least this chance ...
VERIFY_BUDGET_S = 1.5  # ... and with more, up to 1, while the reference's runs fit this budget
PRECISION_CHECKS = 4  # judged calls that also get the float64 reference (precision rule)
GAP_SLACK = 0.5  # a flush after the solution may take this much longer than after the echo ...
GAP_SLACK_S = 50e-6  # ... plus this, plus writing back the call's output (at most a full L2):
# both include switching the GPU back to the supervisor's context, which varies by tens of us
ARM_SLACK = 0.25  # arming may take this much longer than the echo's ...
ARM_SLACK_S = 25e-6  # ... plus this (both wake a stopped process and switch the GPU's context)
CPU_ARM_SLACK, CPU_ARM_SLACK_S = 3.0, 5e-3  # a loaded CPU host wakes processes late; no performance figure
MAX_RAW_CALLS = 400  # per-call figures kept in the record


@dataclass
class TimingOutcome:
    stats: dict[str, Any] | None = None
    flags: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)  # judged timed calls that were wrong
    verified: int = 0
    evidence: dict[str, Any] = field(default_factory=dict)  # kernel evidence of one timed call
    observed: list[dict[str, Any]] = field(default_factory=list)  # what every observed timed call dispatched


class Verifier:
    """Judges a timed call's output exactly as a correctness case: `expected_for(inputs, float64)`
    gives the reference's saved tensors ("expected", and "residual64" when asked and available)."""

    def __init__(
        self,
        expected_for: Callable[[list[Any], bool], dict[str, torch.Tensor]],
        entry: dict[str, Any],
        tolerance: str,
        precision: str,
    ):
        self.expected_for, self.entry, self.tolerance, self.precision = expected_for, entry, tolerance, precision

    def check(self, label: str, inputs: list[Any], output: torch.Tensor, float64: bool) -> str:
        """'' when the output passes every rule a case gets, else why not."""
        saved = self.expected_for(inputs, float64)
        verdict = compare_case(label, "timed_outputs", output, saved, self.entry, self.tolerance, self.precision, None)
        return "; ".join(verdict.failures.values())


class Outputs:
    """Where the solution's call on each input set leaves its output, as tensors the supervisor
    can read: the graphs' outputs mapped through CUDA IPC, or the sets' slots."""

    def __init__(self, memory: TimedMemory, shared: list[dict[str, Any]]):
        self.memory, self.mapped = memory, []
        if shared:
            from ..protocol.cuda_ipc import open_exported

            if len(shared) != memory.count:
                raise SessionLost(f"the solution process described {len(shared)} outputs for {memory.count} sets")
            try:
                self.mapped = [open_exported(d, memory.out_shape, memory.out_dtype) for d in shared]
            except (ValueError, RuntimeError) as exc:
                raise SessionLost(f"the solution process's output locations cannot be read: {exc}") from None

    def of(self, s: int) -> torch.Tensor:
        return self.mapped[s] if self.mapped else self.memory.slots[s]


def prepare(session: Session, region: dict[str, Any], memory: TimedMemory, doorbell: int, timeout_s: float) -> None:
    reply, _ = session.request(PrepareTiming(region, memory.layout(), doorbell), timeout_s, ("timing_ready",))
    if isinstance(reply, Failed):
        raise SessionLost(f"preparing the timed calls failed: {reply.error[:500]}")


def capture(session: Session, timeout_s: float) -> TimingReady:
    reply, _ = session.request(Capture(), timeout_s, ("timing_ready",))
    if isinstance(reply, Failed):
        raise SessionLost(f"capturing the timed calls failed: {reply.error[:500]}")
    return reply


@dataclass
class Sides:
    """The two processes a timing alternates between, each with its doorbell."""

    solution: Session
    solution_bell: Doorbell
    echo: Session
    echo_bell: Doorbell


def time_solution(
    sides: Sides,
    memory: TimedMemory,
    region: dict[str, Any],
    module: Any,
    plan: CallPlan,
    verifier: Verifier,
    timeout_s: float,
    doorbell_offset: int,
    rng: random.Random | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> TimingOutcome:
    """Time the solution by one-call windows (module docstring). Raises SessionLost."""
    rng = rng or random.SystemRandom()
    device = "cuda" if memory.region.is_cuda else "cpu"
    outcome = TimingOutcome()
    prepare(sides.solution, region, memory, doorbell_offset, timeout_s)
    graphs = False
    shared: list[dict[str, Any]] = []
    if device == "cuda":
        ready = capture(sides.solution, timeout_s + 60.0)
        graphs, shared = ready.graphs, list(ready.outputs)
        if ready.evidence:
            outcome.observed.append(ready.evidence)
        if not graphs:
            outcome.details["graph_error"] = ready.detail
    outputs = Outputs(memory, shared)
    work = DeviceWork(device, memory.out_nbytes)
    solution = CallSide(sides.solution, sides.solution_bell, work, timeout_s, clock)
    echo = CallSide(sides.echo, sides.echo_bell, work, timeout_s, clock)
    loop = _Loop(memory, module, device, rng, work, solution, echo, outputs, verifier)
    try:
        solution.start()
        echo.start()
        for _ in range(WARM_CALLS):
            loop.one(scored=False)
        started = clock()
        while not should_stop(loop.nets, clock() - started, plan):
            loop.one(scored=True)
        elapsed = clock() - started
        done = solution.stop()
        echo.stop()
    finally:
        outputs.mapped = []
    if done.evidence:
        outcome.observed.append({"ops": done.evidence.get("ops", {})})
    _evidence_call(outcome, loop, solution)
    _finish(outcome, loop, plan, device, graphs, elapsed, done.own_ms)
    return outcome


class _Loop:
    """The timed calls of one timing, one at a time."""

    def __init__(self, memory, module, device, rng, work, solution, echo, outputs, verifier):
        self.memory, self.module, self.device, self.rng, self.work = memory, module, device, rng, work
        self.solution, self.echo, self.outputs, self.verifier = solution, echo, outputs, verifier
        self.nets: list[float] = []
        self.arms: list[tuple[float, float]] = []  # per scored call: (solution, echo) s from resume to ARMED
        self.raw: list[list[float]] = []  # per scored call: solution window, echo window (ms)
        self.gaps_after_solution: list[float] = []
        self.gaps_after_echo: list[float] = []
        self.failures: list[str] = []
        self.verified = 0
        self.precision_checked = 0
        self.verify_share = 1.0
        self.reference_s: list[float] = []

    def one(self, scored: bool) -> None:
        s = self.rng.randrange(self.memory.count)
        inputs = fresh_inputs(self.module, self.device, self.rng.getrandbits(62))
        self.memory.write(s, inputs)
        self.work.flush()
        self.work.sync()
        echo_s, echo_go_s = self.echo.call(0)
        after_echo = self.work.timed_flush()
        solution_s, solution_go_s = self.solution.call(s)
        after_solution = self.work.timed_flush()
        if scored:
            # On the CPU the figure only tests the machinery: a call of a few microseconds is
            # below the echo's noise there, so the window is kept whole (never negative).
            echo_net = echo_go_s - self.work.echo_kernel_s if self.work.cuda else 0.0
            self.nets.append(solution_go_s - echo_net)
            self.arms.append((solution_s - solution_go_s, echo_s - echo_go_s))
            self.raw.append([round(solution_s * 1e3, 5), round(echo_s * 1e3, 5)])
            self.gaps_after_echo.append(after_echo)
            self.gaps_after_solution.append(after_solution)
        # Judged or not is decided now, after the call answered: it cannot know in advance.
        if self.verified < MAX_VERIFIED and self.rng.random() < self.verify_share:
            self._judge(s, inputs, len(self.nets))

    def _judge(self, s: int, inputs: list[Any], index: int) -> None:
        started = time.perf_counter()
        float64 = self.precision_checked < PRECISION_CHECKS
        why = self.verifier.check(f"timed call {index}", inputs, self.outputs.of(s), float64)
        self.verified += 1
        self.precision_checked += float64
        if why:
            self.failures.append(why)
        self.reference_s.append(time.perf_counter() - started)
        per = sorted(self.reference_s)[len(self.reference_s) // 2]
        self.verify_share = max(MIN_VERIFY_SHARE, min(1.0, VERIFY_BUDGET_S / max(per * MAX_VERIFIED * 4, 1e-9)))


def _evidence_call(outcome: TimingOutcome, loop: _Loop, solution: CallSide) -> None:
    """One more call, not scored, under the kernel profiler (told only as it opens)."""
    solution.start(evidence=True)
    s = loop.rng.randrange(loop.memory.count)
    loop.memory.write(s, fresh_inputs(loop.module, loop.device, loop.rng.getrandbits(62)))
    loop.work.sync()
    solution.call(s)
    outcome.evidence = dict(solution.stop().evidence)


def _finish(
    outcome: TimingOutcome, loop: _Loop, plan: CallPlan, device: str, graphs: bool, elapsed: float, own_ms: list[float]
) -> None:
    if not loop.nets:
        raise TimingUnavailable("no timed call completed")
    summary = summarize(loop.nets)
    method = METHOD["cpu"] if device == "cpu" else METHOD["graphs" if graphs else "eager"]
    own = summarize([ms * 1e-3 for ms in own_ms]).median_s * 1e3 if own_ms else None
    outcome.failures, outcome.verified = loop.failures, loop.verified
    outcome.details.update(
        timing_method=method,
        cuda_graphs=graphs,
        timed_sets=loop.memory.count,
        calls=summary.to_dict(),
        arm_ms={
            "solution": summarize([a for a, _ in loop.arms]).median_s * 1e3,
            "echo": summarize([b for _, b in loop.arms]).median_s * 1e3,
        },
        echo_window_ms=summarize([r[1] * 1e-3 for r in loop.raw]).median_s * 1e3,
        echo_kernel_ms=loop.work.echo_kernel_s * 1e3,
        calls_s=round(elapsed, 3),
        own_ms_per_call=own,
        verified_calls=loop.verified,
        raw_calls_ms=loop.raw[:MAX_RAW_CALLS],
    )
    _gap_check(outcome, loop)
    _arm_check(outcome, loop)
    outcome.stats = {
        "method": method,
        "median_ms": summary.median_s * 1e3,
        "p10_ms": summary.p10_s * 1e3,
        "p90_ms": summary.p90_s * 1e3,
        "ci_rel": summary.rel_halfwidth,
        "reps": summary.calls,
    }


def _gap_check(outcome: TimingOutcome, loop: _Loop) -> None:
    """The flush right after the solution's window must cost what the one right after the echo's
    does, give or take writing back the solution's output (at most a full L2) and some slack."""
    if not loop.work.cuda or not loop.gaps_after_echo:
        return
    after_echo = summarize(loop.gaps_after_echo).median_s
    after_solution = summarize(loop.gaps_after_solution).median_s
    out_bytes = min(loop.memory.out_nbytes, loop.work.l2_bytes)
    writeback_s = after_echo * out_bytes / max(loop.work.l2_bytes * 2, 1)  # the flush reads 2x L2
    bound = after_echo * (1 + GAP_SLACK) + GAP_SLACK_S + writeback_s
    outcome.details["gap"] = {
        "flush_after_echo_ms": after_echo * 1e3,
        "flush_after_solution_ms": after_solution * 1e3,
        "bound_ms": bound * 1e3,
    }
    if after_solution > bound:
        outcome.flags.append(GAP_WORK)


def _arm_check(outcome: TimingOutcome, loop: _Loop) -> None:
    """From being resumed (its inputs already written) to arming, the solution process may take
    what the echo takes (waking, making its GPU context the active one), give or take noise:
    work done there, before its window opens, would be off the clock (`work_before_window`)."""
    if not loop.arms:
        return
    solution = summarize([a for a, _ in loop.arms]).median_s
    echo = summarize([b for _, b in loop.arms]).median_s
    slack, slack_s = (ARM_SLACK, ARM_SLACK_S) if loop.device == "cuda" else (CPU_ARM_SLACK, CPU_ARM_SLACK_S)
    bound = echo * (1 + slack) + slack_s
    outcome.details["arm"] = {"solution_ms": solution * 1e3, "echo_ms": echo * 1e3, "bound_ms": bound * 1e3}
    if solution > bound:
        outcome.flags.append(WORK_BEFORE_WINDOW)
