"""Timing a solution by the supervisor's clock: one call per window, its inputs written just
before it, its output read where the call left it, every call liable to be judged.

The scored time never comes from a figure the solution process reports. This module prepares
the solution process's timed calls (`prepare`, `capture`: one CUDA graph per input set, whose
outputs the supervisor maps through CUDA IPC and reads in place) and hands both processes, the
solution's and the trusted echo's, to `timing.measure`, which times them call by call through
the gate (`protocol.gate`) or, where no graph could be captured and on the CPU, the rung doorbell.

Judging runs to the end (`Judging`): every timed call, first to last, has the same chance of
being judged, fixed once the warm calls have measured what judging costs and never changed
after, so nothing the solution sees of past calls tells it anything of the next one. A judged
call gets exactly a correctness case's rules (`Verifier`: tolerance, dtype, finiteness and the
float64 precision rule), decided only after the call answered.

After the calls: the gap, prep and busy checks (`timing.checks`) and the summary (`timing.stats`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import mps
from ..protocol.doorbell import Doorbell
from ..protocol.messages import Capture, Failed, PrepareTiming, TimingReady
from .checks import compare_case
from .session import Session, SessionLost
from .timing.checks import GAP_WORK, GPU_BUSY, WORK_BEFORE_WINDOW, gap, prep
from .timing.device_work import DeviceWork
from .timing.measure import Calls, Feed, measure
from .timing.memory import TimedMemory, TimingUnavailable, fresh_inputs
from .timing.resolution import UNRESOLVED, unresolved
from .timing.sides import GateTampered, RemoteSide
from .timing.snapshot import Snapshots
from .timing.stats import CallPlan, summarize

METHOD = {
    "gated": "supervisor_gated_cuda_graphs",
    "eager": "supervisor_calls_cuda_eager",
    "cpu": "supervisor_calls_cpu",
}
GATE_TAMPERED = "gate_tampered"
TIMING_GAP_FLAGS = (GAP_WORK, WORK_BEFORE_WINDOW, GPU_BUSY, GATE_TAMPERED)  # each fails `timing_gap`
JUDGE_BUDGET = 1.0  # judging may cost this share of the timing loop's own time ...
MIN_JUDGE_SHARE = 0.05  # ... but every call is judged with at least this chance
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
    gap_reasons: dict[str, str] = field(default_factory=dict)  # flag -> why it fails `timing_gap`
    samples: list[dict[str, Any]] = field(default_factory=list)  # evidence of observed timed calls

    def flag(self, name: str, why: str) -> None:
        if name not in self.flags:
            self.flags.append(name)
        self.gap_reasons.setdefault(name, why)


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


class Judging:
    """Decides, after each call answered, whether to judge it, and judges it (`Verifier`).

    The warm calls are always judged, which measures what one judgement costs; from then on every
    call is judged with one fixed chance, JUDGE_BUDGET of the loop's own seconds per call over a
    judgement's seconds, at least MIN_JUDGE_SHARE: bounded by cost, never by a count, so the
    2,000th call is as likely to be judged as the 10th."""

    def __init__(
        self,
        verifier: Verifier,
        outputs: Outputs,
        rng: Any,
        clock: Callable[[], float] = time.perf_counter,
        echo_output: torch.Tensor | None = None,
        snapshots: Snapshots | None = None,
    ):
        self.verifier, self.outputs, self.rng, self.clock = verifier, outputs, rng, clock
        self.echo_output = echo_output  # as many bytes as an output, in memory only the timer reaches
        self.snapshots = snapshots or Snapshots(on_device=False)
        self.share: float | None = None
        self.verified = 0
        self.failures: list[str] = []
        self.judge_s: list[float] = []
        self.loop_s: list[float] = []
        self._last = clock()

    def _source(self, set_index: int, echo: bool) -> torch.Tensor | None:
        return self.echo_output if echo else self.outputs.of(set_index)

    def before_window(self, side: Any, set_index: int, echo: bool) -> None:
        """Under MPS: the copy at DONE, queued behind DONE on the timer's stream (`Snapshots`)."""
        if getattr(side, "gated", False):
            self.snapshots.before_window(side.gate, side.seq, self._source(set_index, echo), echo)

    def after_window(self, set_index: int, echo: bool) -> None:
        """Without MPS: copy the output as it stands the moment the window closed (queued at
        once): the copy judged calls are judged on. The echo's turn copies as many bytes."""
        self.snapshots.after_window(self._source(set_index, echo), echo)

    def after_call(self, set_index: int, inputs: list[Any], index: int, warm: bool) -> None:
        now = self.clock()
        self.loop_s.append(now - self._last)
        if warm or self.share is None and not self.judge_s:
            self._judge(set_index, inputs, index)
        else:
            if self.share is None:
                per_judgement = sorted(self.judge_s)[len(self.judge_s) // 2]
                per_call = sorted(self.loop_s)[len(self.loop_s) // 2]
                self.share = max(MIN_JUDGE_SHARE, min(1.0, JUDGE_BUDGET * per_call / max(per_judgement, 1e-9)))
            if self.rng.random() < self.share:
                self._judge(set_index, inputs, index)
        self._last = self.clock()

    def _judge(self, set_index: int, inputs: list[Any], index: int) -> None:
        started = self.clock()
        output = self.snapshots.output()
        output = self.outputs.of(set_index) if output is None else output
        why = self.verifier.check(f"timed call {index}", inputs, output, True)
        self.verified += 1
        if why:
            self.failures.append(why)
        self.judge_s.append(self.clock() - started)


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


def _decoy(memory: TimedMemory) -> TimedMemory:
    """One input set in memory only the timer can reach: the echo's call gets the same write."""
    from .timing.memory import set_bytes

    nbytes = set_bytes(memory.template, memory.out_nbytes)
    region = torch.empty(nbytes, dtype=torch.uint8, device=memory.region.device)
    return TimedMemory(region, memory.template, memory.out_shape, memory.out_dtype, 1)


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
    capture_timeout_s: float | None = None,
) -> TimingOutcome:
    """Time the solution by one-call windows (module docstring). Raises SessionLost."""
    rng = rng or random.SystemRandom()
    device = "cuda" if memory.region.is_cuda else "cpu"
    outcome = TimingOutcome()
    prepare(sides.solution, region, memory, doorbell_offset, timeout_s)
    graphs = False
    shared: list[dict[str, Any]] = []
    if device == "cuda":
        ready = capture(sides.solution, timeout_s + 60.0 if capture_timeout_s is None else capture_timeout_s)
        graphs, shared = ready.graphs, list(ready.outputs)
        if ready.evidence:
            outcome.observed.append(ready.evidence)
        if not graphs:
            outcome.details["graph_error"] = ready.detail
    outputs = Outputs(memory, shared)
    work = DeviceWork(device, memory.out_nbytes)
    cuda = device == "cuda"
    solution = RemoteSide(sides.solution, sides.solution_bell, sides.solution_bell.gate_words(), timeout_s, cuda, clock)
    echo = RemoteSide(sides.echo, sides.echo_bell, sides.echo_bell.gate_words(), timeout_s, cuda, clock)
    decoy = _decoy(memory)
    feed = Feed(
        memory.count,
        lambda: fresh_inputs(module, device, rng.getrandbits(62)),
        memory.write,
        lambda inputs: decoy.write(0, inputs),
    )
    snapshots = _snapshots(cuda and graphs, solution, echo, sides)
    judging = Judging(verifier, outputs, rng, echo_output=decoy.slots[0], snapshots=snapshots)
    done = None
    try:
        solution.start(gated=graphs)
        echo.start(gated=graphs)
        try:
            calls = measure(solution, echo, feed, work, plan, rng, judging, subtract_echo=cuda, clock=clock)
        except GateTampered as exc:
            outcome.flag(GATE_TAMPERED, f"the solution's gate was opened or answered outside its call: {exc}")
            calls = None
        done = solution.stop()
        echo.stop()
        if calls is not None and not calls.busy:
            outcome.evidence = _evidence_call(solution, memory, feed, rng, work)
    finally:
        snapshots.release()  # no wait of the timer's stays queued behind a DONE that never came
        outputs.mapped = []
    if done.evidence:
        outcome.observed.append({"ops": done.evidence.get("ops", {})})
    outcome.samples = list(done.samples)
    if calls is None:
        outcome.failures, outcome.verified = judging.failures, judging.verified
        return outcome
    _finish(outcome, calls, judging, memory, work, device, graphs, done.own_ms)
    return outcome


def _snapshots(gated_cuda: bool, solution: RemoteSide, echo: RemoteSide, sides: Sides) -> Snapshots:
    """The copies at DONE: queued on the device behind DONE under MPS, by the host without."""
    if not (gated_cuda and mps.in_use()):
        return Snapshots(on_device=False)
    from ..protocol.gate import Driver, GateUnavailable

    try:
        snapshots = Snapshots(on_device=True, driver=Driver())
        snapshots.map_gate(solution.gate, sides.solution_bell.address)
        snapshots.map_gate(echo.gate, sides.echo_bell.address)
    except GateUnavailable:  # the timer's context cannot map the words: the host copies at DONE
        return Snapshots(on_device=False)
    return snapshots


def _evidence_call(solution: RemoteSide, memory: TimedMemory, feed: Feed, rng: Any, work: DeviceWork) -> dict:
    """One more call, not scored, rung (never gated) under the kernel profiler (told only as it opens)."""
    solution.start(gated=False, evidence=True)
    s = rng.randrange(memory.count)
    solution.arm(s)
    memory.write(s, feed.draw())
    work.sync()
    solution.ring()
    return dict(solution.stop().evidence)


def _finish(
    outcome: TimingOutcome,
    calls: Calls,
    judging: Judging,
    memory: TimedMemory,
    work: DeviceWork,
    device: str,
    graphs: bool,
    own_ms: list[float],
) -> None:
    if calls.busy:
        outcome.flag(GPU_BUSY, calls.busy)
    outcome.failures, outcome.verified = judging.failures, judging.verified
    if not calls.nets:
        if calls.busy:
            return
        raise TimingUnavailable("no timed call completed")
    summary = summarize(calls.nets)
    method = METHOD["cpu"] if device == "cpu" else METHOD["gated" if graphs else "eager"]
    own = summarize([ms * 1e-3 for ms in own_ms]).median_s * 1e3 if own_ms else None

    def ms(values: list[float]) -> float:
        return summarize(values).median_s * 1e3

    outcome.details.update(
        timing_method=method,
        cuda_graphs=graphs,
        gated=graphs and device == "cuda",
        mps=mps.in_use() if device == "cuda" else False,
        timed_sets=memory.count,
        calls=summary.to_dict(),
        arm_ms={"solution": ms(calls.arms), "echo": ms(calls.echo_arms)},
        echo_window_ms=ms(calls.echo_windows),
        echo_kernel_ms=work.echo_kernel_s * 1e3,
        echo_call_ms=work.echo_call_s * 1e3,
        idle_flush_ms=work.idle_flush_s * 1e3,
        calls_s=round(calls.elapsed_s, 3),
        own_ms_per_call=own,
        verified_calls=judging.verified,
        judge_share=judging.share,
        raw_calls_ms=[[round(w * 1e3, 5), round(e * 1e3, 5)] for w, e in zip(calls.windows, calls.echo_windows)][
            :MAX_RAW_CALLS
        ],
    )
    if work.cuda:
        found, failed = gap(calls.after, calls.after_echo, memory.out_nbytes, work)
        outcome.details["gap"] = found
        if failed:
            outcome.flag(
                GAP_WORK,
                f"a flush right after the solution's calls took {found['flush_after_solution_ms']:.4g} ms against "
                f"{found['flush_after_echo_ms']:.4g} ms after the echo's (at most {found['bound_ms']:.4g}): "
                "its work went on running on the GPU after it said done",
            )
        found, failed = prep(calls.preps, calls.echo_preps)
        outcome.details["prep"] = found
        if failed:
            outcome.flag(
                WORK_BEFORE_WINDOW,
                f"writing the inputs and clearing the L2 before the solution's calls took {found['solution_ms']:.4g} ms "
                f"against {found['echo_ms']:.4g} ms before the echo's (at most {found['bound_ms']:.4g}): "
                "work of the solution's ran beside them, before its window opened",
            )
    under_mps = bool(outcome.details.get("mps"))
    why_unresolved = unresolved(summary.median_s, under_mps) if work.cuda else ""
    if why_unresolved:  # the verdict stands; the figure is kept as evidence, never scored
        outcome.flags.append(UNRESOLVED)
        outcome.details["unresolved"] = why_unresolved
    outcome.stats = {
        "unresolved": why_unresolved,
        "method": method,
        "median_ms": summary.median_s * 1e3,
        "p10_ms": summary.p10_s * 1e3,
        "p90_ms": summary.p90_s * 1e3,
        "ci_rel": summary.rel_halfwidth,
        "reps": summary.calls,
    }
