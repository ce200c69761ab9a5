"""Timing a solution by the supervisor's clock: windows it opens and closes, in memory it owns.

The scored time never comes from a figure the solution process reports. The supervisor:

- lays out the timed calls' inputs and outputs in its own memory (`timed_memory`) and, before
  every window, writes new inputs there from seeds the solution process never learns;
- opens a window of k calls (`messages.Window`) and closes it when the reply has come and it has
  copied the outputs it will verify out of the region: its clock runs from the request to that
  copy, so work the solution defers past its reply is timed (or its output is stale);
- stops the solution process from its reply until the next request (`Session.pause`), so no
  thread of it runs while the next window's inputs are written: host-side work outside the
  windows cannot compute on them ahead of the clock;
- runs windows of several sizes back to back, in rounds, and takes the slope of window time over
  k as the per-call time (`windows`): the request, the reply and the copy are a fixed cost per
  window and fall out; on CUDA the calls are replayed from CUDA graphs, so host launch overhead
  falls out too;
- rotates over input sets and slots whose total exceeds the L2 where memory allows, so calls read
  cold inputs by construction;
- stops when the slope's standard error is below its target, or at a cap on its own clock, then
  runs one last window that is not scored;
- verifies, after the last window, the outputs of calls it picked at random (never revealed)
  against the reference on the same inputs (`timed_outputs`);
- checks that calls are independent: windows of one call, against the same windows of a trusted
  echo (a solution process running a model that computes nothing), must cost what the slope
  says; a solution that batches a window's calls is scored at its one-call time
  (`calls_not_independent`);
- collects kernel evidence over one window picked at random (`window_evidence`).

The solution process's own figure for each window (CUDA events on CUDA) is kept as evidence
(`event_ms_per_call`) beside the scored one.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..protocol.messages import Capture, Failed, PrepareTiming, TimingReady, Window, WindowDone
from .checks import compare_case
from .session import Session, SessionLost
from .timed_memory import TimedMemory, fresh_inputs
from .windows import WindowPlan, fit, known, measure, size_windows

METHOD = {"cuda": "supervisor_windows_cuda_graphs", "cpu": "supervisor_windows_cpu"}
EAGER_METHOD = "supervisor_windows_eager"  # CUDA, when the forward could not be captured
NOT_INDEPENDENT = "calls_not_independent"
MAX_VERIFIED = 32  # timed outputs checked against the reference per evaluation
MAX_SETS = 256
NOISE_SIGMAS = 5.0  # of the one-call windows' noise, allowed before calls count as not independent
MAX_RAW_WINDOWS = 400  # per-window figures kept in the record


@dataclass(frozen=True)
class ClockPlan:
    device: str
    cap_s: float  # the most seconds of scored windows, by the supervisor's clock
    target_rel: float  # stop when the per-call time's standard error is this fraction of it
    min_rounds: int
    largest_window_s: float  # the largest window's calls should take about this long
    max_sets: int
    single_windows: int  # one-call windows of the solution and of the echo each
    independence_factor: float  # the one-call time may exceed the slope by this factor ...
    independence_abs_ms: float  # ... plus this much

    @classmethod
    def for_device(cls, device: str, cap_s: float) -> ClockPlan:
        if device == "cuda":
            # At least 8 rounds: the standard error comes from the spread of the round slopes.
            return cls(device, cap_s, 0.0025, 8, 0.05, MAX_SETS, 60, 2.0, 0.005)
        # CPU: interpreted kernels; the figure tests the machinery, it is no performance figure.
        return cls(device, cap_s, 0.05, 2, 0.05, 2, 3, 2.0, 1.0)

    def window_plan(self, sizes: tuple[int, ...]) -> WindowPlan:
        """The stopping rule both the solution's windows and the baseline's run under."""
        return WindowPlan(sizes, min_rounds=self.min_rounds, target_rel=self.target_rel, cap_s=self.cap_s)


@dataclass
class TimingOutcome:
    stats: dict[str, Any] | None = None
    flags: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)  # timed outputs that did not match
    verified: int = 0
    evidence: dict[str, Any] = field(default_factory=dict)  # kernel evidence of one timed window
    observed: list[dict[str, Any]] = field(default_factory=list)  # what every observed timed call dispatched


@dataclass
class Pick:
    label: str
    inputs: list[Any]
    output: torch.Tensor


class Verifier:
    """Checks picked timed outputs against the reference on the same inputs."""

    def __init__(
        self,
        expected_for: Callable[[list[Any]], torch.Tensor],
        entry: dict[str, Any],
        tolerance: str,
        precision: str,
    ):
        self.expected_for, self.entry, self.tolerance, self.precision = expected_for, entry, tolerance, precision

    def check(self, pick: Pick) -> str:
        """'' when the picked call's output matches the reference, else why not."""
        # Compared where both lie (the device): a large output is not copied to the host per pick.
        expected = self.expected_for(pick.inputs).reshape(-1).to(torch.float64)
        got = pick.output.detach().reshape(-1).to(expected.device, torch.float64)
        verdict = compare_case(
            pick.label, "timed_outputs", got, {"expected": expected}, self.entry, self.tolerance, self.precision, None
        )
        return "; ".join(verdict.failures.values())


class Windows:
    """The supervisor's side of one solution process's timing: writes, opens, closes, picks."""

    def __init__(
        self,
        session: Session,
        memory: TimedMemory,
        module: Any,
        device: str,
        rng: random.Random,
        timeout_s: float,
    ):
        self.session, self.memory, self.module, self.device = session, memory, module, device
        self.rng, self.timeout_s = rng, timeout_s
        self.picks: list[Pick] = []
        self.seen = 0
        self.event_ms: list[tuple[int, float]] = []

    def sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    def run(self, k: int, *, pick: bool = False, evidence: bool = False, label: str = "") -> tuple[float, WindowDone]:
        """One window of k calls on new inputs; (supervisor seconds, the reply)."""
        picked = self.rng.randrange(k) if pick else None
        kept: list[Any] = []
        for i in range(k):  # one secret seed per window; each set goes on from the one before
            inputs = fresh_inputs(self.module, self.device, self.rng.getrandbits(62) if i == 0 else None)
            self.memory.write(i, inputs)
            if i == picked:
                kept = inputs
        self.sync()
        started = time.perf_counter()
        reply, _ = self.session.request(Window(k, evidence), self.timeout_s, ("window_done",))
        if isinstance(reply, Failed):
            raise SessionLost(f"a timed window failed: {reply.error[:500]}")
        if reply.calls != k:
            raise SessionLost(f"the solution process answered for {reply.calls} calls, not {k}")
        output = self.memory.snapshot(picked) if picked is not None else None
        self.sync()
        seconds = time.perf_counter() - started
        self.session.pause()  # until the next request: it gets no CPU while the next inputs are written
        if output is not None:  # a uniform sample of MAX_VERIFIED of all picked calls (reservoir)
            self.seen += 1
            pick_ = Pick(f"{label} call {picked} of {k}", kept, output)
            if len(self.picks) < MAX_VERIFIED:
                self.picks.append(pick_)
            elif (j := self.rng.randrange(self.seen)) < MAX_VERIFIED:
                self.picks[j] = pick_
        return seconds, reply


def _request(session: Session, message: Any, timeout_s: float) -> TimingReady:
    reply, _ = session.request(message, timeout_s, ("timing_ready",))
    if isinstance(reply, Failed):
        raise SessionLost(f"preparing the timed calls failed: {reply.error[:500]}")
    return reply


def prepare(session: Session, region: dict[str, Any], memory: TimedMemory, timeout_s: float) -> None:
    _request(session, PrepareTiming(region, memory.layout()), timeout_s)


def time_solution(
    session: Session,
    memory: TimedMemory,
    region: dict[str, Any],
    module: Any,
    plan: ClockPlan,
    verifier: Verifier,
    echo: Callable[[], Session | None],
    timeout_s: float,
    rng: random.Random | None = None,
) -> TimingOutcome:
    """Time the solution by windows (module docstring). Raises SessionLost."""
    rng = rng or random.SystemRandom()
    outcome = TimingOutcome()
    prepare(session, region, memory, timeout_s)
    windows = Windows(session, memory, module, plan.device, rng, timeout_s)

    def capture(sets: int, unit: int) -> bool:
        ready = _request(session, Capture(sets, unit), timeout_s + 60.0)
        if ready.evidence:
            outcome.observed.append(ready.evidence)
        if not ready.graphs:
            outcome.details["graph_error"] = ready.detail
        return ready.graphs

    sizing = size_windows(
        lambda k: windows.run(k)[0],
        memory.count,
        device=plan.device,
        max_sets=plan.max_sets,
        largest_window_s=plan.largest_window_s,
        capture=capture,
    )
    sizes = sizing.sizes
    wplan = plan.window_plan(sizes)
    events: list[list[tuple[int, float]]] = []
    raw: list[list[float]] = []  # per scored window: k, supervisor ms, event ms, solution-process host ms
    evidence_round = rng.randrange(1, 3)

    def run(k: int, round_index: int) -> float:
        if round_index < 0:
            return windows.run(k)[0]
        seconds, reply = windows.run(k, pick=True, label=f"round {round_index}")
        if reply.evidence:
            outcome.observed.append({"ops": reply.evidence.get("ops", {})})
        if len(events) <= round_index:
            events.append([])
        events[round_index].append((k, reply.event_ms * 1e-3))
        raw.append([k, round(seconds * 1e3, 5), round(reply.event_ms, 5), round(reply.host_ms, 5)])
        return seconds

    def after_round(done: int) -> None:
        if done == evidence_round:  # a window picked at random, told only as it opens, not scored
            _, reply = windows.run(rng.choice(sizes), evidence=True, label="evidence")
            outcome.evidence = dict(reply.evidence)

    estimate, rounds, elapsed = measure(run, sizes, wplan, rng, after_round)
    windows.run(sizes[-1], label="last (not scored)")
    per_call_ms = estimate.per_call_s * 1e3
    outcome.details.update(
        timing_method=METHOD[plan.device] if sizing.graphs or plan.device == "cpu" else EAGER_METHOD,
        cuda_graphs=sizing.graphs,
        window_sizes=list(sizes),
        timed_sets=sizing.sets,
        rotation_bytes=memory.bytes_for(sizing.sets),
        probe_ms=round(sizing.probe_s * 1e3, 4),
        fit=estimate.to_dict(),
        known=known(estimate, wplan),
        windows_s=round(elapsed, 3),
        event_ms_per_call=fit(events).per_call_s * 1e3,
        windows=raw[:MAX_RAW_WINDOWS],
    )
    _independence(outcome, windows, plan, echo, per_call_ms)
    scored = (
        max(per_call_ms, outcome.details.get("single_call_ms") or 0.0)
        if NOT_INDEPENDENT in outcome.flags
        else per_call_ms
    )
    outcome.stats = {
        "method": outcome.details["timing_method"],
        "median_ms": scored,
        "p10_ms": scored,
        "p90_ms": scored,
        "cv": estimate.rel_se if math.isfinite(estimate.rel_se) else 0.0,
        "reps": sum(k for r in rounds for k, _ in r),
        "flags": [],  # how well the estimate is known is in details: fit.rel_se, known
        "details": {},
    }
    _verify(outcome, windows, verifier)
    return outcome


def _independence(
    outcome: TimingOutcome, windows: Windows, plan: ClockPlan, echo: Callable[[], Session | None], per_call_ms: float
) -> None:
    """Windows of one call, the solution's and a trusted echo's in turn: their difference is
    what one call costs on its own, which must not exceed the slope by much."""
    partner = echo()
    if partner is None:
        outcome.details["independence"] = "not checked: the echo process could not start"
        return
    echoed = Windows(partner, windows.memory, windows.module, windows.device, windows.rng, windows.timeout_s)
    own, theirs = [], []
    for _ in range(plan.single_windows):
        own.append(windows.run(1)[0])
        theirs.append(echoed.run(1)[0])
    single_ms = (_lower_quartile(own) - _lower_quartile(theirs)) * 1e3
    # What the two can be off by: one-call windows swing by tens of microseconds (the other
    # process's scheduling, a context switch on the GPU), and the bound must never flag an
    # honest solution on that noise, so it resolves batching gains only well above it.
    noise_ms = NOISE_SIGMAS * 1e3 * math.hypot(_median_se(own), _median_se(theirs))
    bound = plan.independence_factor * per_call_ms + max(plan.independence_abs_ms, noise_ms)
    outcome.details.update(
        single_call_ms=round(single_ms, 6),
        echo_window_ms=round(_lower_quartile(theirs) * 1e3, 6),
        independence=f"one call alone {single_ms:.4g} ms vs {per_call_ms:.4g} ms per call in windows "
        f"(at most {bound:.4g}, of which {noise_ms:.3g} ms for the windows' noise)",
    )
    if single_ms > bound:
        outcome.flags.append(NOT_INDEPENDENT)
        outcome.details["sol_ms_source"] = (
            "one call alone, less the trusted echo: the calls of a window cost less together than apart"
        )


def _lower_quartile(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=4)[0]


def _median_se(samples: list[float]) -> float:
    """A robust standard error of a median: 1.2533 x 1.4826 x MAD / sqrt(n)."""
    median = statistics.median(samples)
    mad = statistics.median(abs(x - median) for x in samples)
    return 1.2533 * 1.4826 * mad / math.sqrt(len(samples))


def _verify(outcome: TimingOutcome, windows: Windows, verifier: Verifier) -> None:
    """Check every kept pick (already a uniform sample of at most MAX_VERIFIED)."""
    for pick in windows.picks:
        outcome.verified += 1
        why = verifier.check(pick)
        if why:
            outcome.failures.append(why)
