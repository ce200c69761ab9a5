"""`time_solution`, the timing room's first entry: the solution timed by the supervisor's clock,
one call per window, its inputs written just before it, its output read where the call left it,
every call liable to be judged.

The scored time never comes from a figure the solution process reports. In order:

1. the timing region (`memory.solution_memory`: on CUDA a device allocation shared by CUDA IPC,
   on the CPU a part of the solution's arena), filled with valid inputs;
2. the trusted echo (`echo.start_echo`), prepared (and captured on CUDA);
3. the solution's timed calls prepared and, on CUDA, captured (one graph per input set, whose
   outputs the supervisor maps through CUDA IPC and reads in place: `judging.Outputs`);
4. the setup both sides share (`rig.Rig`) and `measure`, call by call through the gate
   (`protocol.gate`) or, where no graph could be captured and on the CPU, the rung doorbell,
   every call liable to be judged (`judging.Judging`);
5. one more call under the kernel profiler (`_evidence_call`), then the gap and prep witnesses
   (`witness`), the figures (`rig.Figures`) and the floor below which a time is not scored
   (`resolution`).

Every conversation with a process goes through its `timed_process.TimedProcess`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ... import mps
from ...protocol import cuda_ipc
from ...protocol.channel import Arena
from ...protocol.gate import gate_kind
from ...protocol.gate_graph import GRAPH_GATES
from ..session import Session
from .device_work import DeviceWork
from .echo import start_echo
from .errors import GateTampered, GateUnavailable, TimingUnavailable
from .judging import Judging, OutputCheck, Outputs
from .measure import CallTimes, Feed
from .memory import TimedMemory, solution_memory
from .resolution import UNRESOLVED, time_sliced_prep, unresolved
from .rig import Figures, Rig
from .snapshot import Snapshots
from .stats import summarize
from .timed_process import TimedProcess
from .witness import GAP_WORK, GPU_BUSY, WORK_BEFORE_WINDOW, gap, prep

METHOD = {
    "gated": "supervisor_gated_cuda_graphs",
    "eager": "supervisor_calls_cuda_eager",
    "cpu": "supervisor_calls_cpu",
}
GATE_TAMPERED = "gate_tampered"
TIMING_GAP_FLAGS = (GAP_WORK, WORK_BEFORE_WINDOW, GPU_BUSY, GATE_TAMPERED)  # each fails `timing_gap`
MAX_RAW_CALLS = 400  # per-call figures kept in the record
# Its steps, in order, for `mark`: the region, the echo, capture and the rig set up; the timed
# calls; stopping both sides and the profiled call; the witnesses and figures, the echo's end.
TIMING_STEPS = ("setup", "calls", "evidence", "close")


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


@dataclass(frozen=True)
class SolutionTiming:
    """What timing a solution takes from its evaluation (the candidate phase fills it in)."""

    session: Session  # the solution's; spoken to only through its `TimedProcess`
    start_process: Callable[[], tuple[Session, Arena]]  # the trusted echo's process, set up; its arena
    module: Any  # the problem's module: its `get_inputs()` draws every call's inputs
    template: list[Any]  # the inputs of the correctness case that templates the timed calls
    expected: torch.Tensor  # that case's expected output: the shape and dtype of every call's
    verifier: OutputCheck  # judges a timed call's output exactly as that case's
    device: str
    cpu_region: tuple[int, int]  # (offset, bytes) of the CPU timing region in the solution's arena
    window_limit_s: float
    capture_limit_s: float


def _no_mark(step: str) -> None:
    pass


def time_solution(
    ctx: SolutionTiming,
    seconds: float,
    rng: random.Random,
    *,
    clock: Callable[[], float] = time.perf_counter,
    mark: Callable[[str], None] = _no_mark,
) -> TimingOutcome:
    """Time the solution by one-call windows (module docstring). Raises SessionLost, and
    TimingUnavailable when the problem cannot be timed. `mark(step)` is told as each of
    `TIMING_STEPS` starts (the record's `solution_timing_*` steps)."""
    mark("setup")
    cuda = ctx.device == "cuda"
    solution = TimedProcess.of(ctx.session, ctx.window_limit_s, cuda, clock)
    memory, region = solution_memory(ctx.device, ctx.template, ctx.expected, solution.view, ctx.cpu_region)
    # A spin node heads each graph only under a graph gate (for measurement): then the captures
    # keep their graphs for it.
    keep = cuda and gate_kind(mps.in_use()) in GRAPH_GATES
    echo, echo_arena = start_echo(
        ctx.start_process, ctx.window_limit_s, ctx.capture_limit_s, cuda, clock, keep_graphs=keep
    )
    interrupted = False
    try:
        return _time(solution, echo, memory, region, ctx, seconds, rng, clock, keep, mark)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        # After Ctrl-C the echo may be mid-call, waiting for a GO that never comes: asking it to
        # finish would wait FINISH_LIMIT_S for nothing. The zygote's reap kills it either way.
        if not interrupted:
            echo.finish()
        echo_arena.close()
        if cuda:
            cuda_ipc.close_exported()


def _time(
    solution: TimedProcess,
    echo: TimedProcess,
    memory: TimedMemory,
    region: dict[str, Any],
    ctx: SolutionTiming,
    seconds: float,
    rng: random.Random,
    clock: Callable[[], float],
    keep_graphs: bool = False,
    mark: Callable[[str], None] = _no_mark,
) -> TimingOutcome:
    device = "cuda" if memory.region.is_cuda else "cpu"
    outcome = TimingOutcome()
    solution.prepare(region, memory.layout())
    graphs = False
    shared: list[dict[str, Any]] = []
    if device == "cuda":
        ready = solution.capture(ctx.capture_limit_s, keep_graphs)
        graphs, shared = ready.graphs, list(ready.outputs)
        if ready.evidence:
            outcome.observed.append(ready.evidence)
        if not graphs:
            outcome.details["graph_error"] = ready.detail
    outputs = Outputs(memory, shared)
    rig = Rig(memory, ctx.module, seconds, rng)
    cuda = device == "cuda"
    snapshots = _snapshots(cuda and graphs, solution, echo)
    judging = Judging(ctx.verifier, outputs, rng, echo_output=rig.decoy.slots[0], snapshots=snapshots)
    done = None
    held = graphs and rig.held is not None  # the occupancy gate: the timer's HOLD holds each call
    try:
        how = {
            "spin_gate": graphs and rig.gate == "spin",
            "spin_node": graphs and rig.gate in GRAPH_GATES,
            "graph_gate": rig.gate if rig.gate in GRAPH_GATES else "node",
            "hold": rig.held.hold if held else None,
        }
        solution.start(gated=graphs, **how)
        echo.start(gated=graphs, fused_echo=graphs and rig.echo in ("fused", "held"), **how)
        try:
            mark("calls")
            calls = rig.measure(solution, echo, held=held, judge=judging, subtract_echo=cuda, clock=clock)
        except GateTampered as exc:
            outcome.flag(GATE_TAMPERED, f"the solution's gate was opened or answered outside its call: {exc}")
            calls = None
        mark("evidence")
        done = solution.stop()
        echo.stop()
        if calls is not None and not calls.busy:
            outcome.evidence = _evidence_call(solution, memory, rig.feed, rng, rig.work)
        mark("close")
    finally:
        snapshots.release()  # no wait of the timer's stays queued behind a DONE that never came
        outputs.mapped = []
        rig.close()
    if done.evidence:
        outcome.observed.append({"ops": done.evidence.get("ops", {})})
    outcome.samples = list(done.samples)
    if calls is None:
        outcome.failures, outcome.verified = judging.failures, judging.verified
        return outcome
    _finish(outcome, calls, judging, memory, rig, device, graphs, done.own_ms)
    return outcome


def _snapshots(gated_cuda: bool, solution: TimedProcess, echo: TimedProcess) -> Snapshots:
    """The copies at DONE: queued on the device behind DONE under MPS, by the host without."""
    if not (gated_cuda and mps.in_use()):
        return Snapshots(on_device=False)
    from ...protocol.gate import Driver

    try:
        snapshots = Snapshots(on_device=True, driver=Driver())
        snapshots.map_gate(solution.gate, solution.bell.address)
        snapshots.map_gate(echo.gate, echo.bell.address)
    except GateUnavailable:  # the timer's context cannot map the words: the host copies at DONE
        return Snapshots(on_device=False)
    return snapshots


def _evidence_call(solution: TimedProcess, memory: TimedMemory, feed: Feed, rng: Any, work: DeviceWork) -> dict:
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
    calls: CallTimes,
    judging: Judging,
    memory: TimedMemory,
    rig: Rig,
    device: str,
    graphs: bool,
    own_ms: list[float],
) -> None:
    work = rig.work
    if calls.busy:
        outcome.flag(GPU_BUSY, calls.busy)
    outcome.failures, outcome.verified = judging.failures, judging.verified
    if not calls.nets:
        if calls.busy:
            return
        raise TimingUnavailable("no timed call completed")
    method = METHOD["cpu"] if device == "cpu" else METHOD["gated" if graphs else "eager"]
    figures = Figures.of(calls, work, method, rig.gate if graphs else "", rig.echo if graphs else "")
    summary = figures.calls
    own = summarize([ms * 1e-3 for ms in own_ms]).median_s * 1e3 if own_ms else None

    def ms(values: list[float]) -> float:
        return summarize(values).median_s * 1e3

    outcome.details.update(
        timing_method=figures.method,
        cuda_graphs=graphs,
        gated=graphs and device == "cuda",
        mps=figures.mps,
        gate=figures.gate,
        echo=figures.echo,
        timed_sets=memory.count,
        calls=summary.to_dict(),
        arm_ms={"solution": ms(calls.arms), "echo": ms(calls.echo_arms)},
        echo_window_ms=figures.echo_window_ms,
        echo_kernel_ms=work.echo_kernel_s * 1e3,
        echo_call_ms=figures.echo_call_ms,
        idle_flush_ms=work.idle_flush_s * 1e3,
        calls_s=round(calls.elapsed_s, 3),
        own_ms_per_call=own,
        verified_calls=judging.verified,
        judge_share=judging.share,
        judge_calls_needed=judging.calls_needed(),
        loop_ms={step: round(ms(times), 4) for step, times in calls.steps.items() if times},
        raw_calls_ms=[[round(w * 1e3, 5), round(e * 1e3, 5)] for w, e in zip(calls.windows, calls.echo_windows)][
            :MAX_RAW_CALLS
        ],
    )
    under_mps = bool(outcome.details.get("mps"))
    sliced = ""  # without MPS, why the prep witness leaves the time unresolved instead of failing
    if work.cuda:
        events = (calls.after_gpu, calls.after_echo_gpu)
        found, failed = gap(
            calls.after, calls.after_echo, memory.out_nbytes, work, under_mps, by_events=events, call_s=summary.median_s
        )
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
        if failed and not under_mps:
            sliced = time_sliced_prep(found["solution_ms"], found["echo_ms"])
        elif failed:
            outcome.flag(
                WORK_BEFORE_WINDOW,
                f"writing the inputs and clearing the L2 before the solution's calls took {found['solution_ms']:.4g} ms "
                f"against {found['echo_ms']:.4g} ms before the echo's (at most {found['bound_ms']:.4g}): "
                "work of the solution's ran beside them, before its window opened",
            )
    why_unresolved = (unresolved(summary.median_s, under_mps) if work.cuda else "") or sliced
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
