"""The candidate phase of one evaluation: the solution process, driven step by step.

`run_solution` lays out the arena (the doorbell's words, request inputs, outputs and, on the CPU,
the timing region), has the zygote fork a fresh sandboxed solution process and drives it
(`_Run.drive`): the handshake, setup (import, construct, load the reference's weights), every
planned case, the check that would make timing wasted (`_already_incorrect`), timing
(`timing.time_solution`) and finish. Every step has a limit on the supervisor's clock (`step_limits`).

It owns the `candidate` phase of `Record.phase_s` and splits it, with a lap timer
(`phases.Laps`), into contiguous steps that add up to it: `solution_arena` (sizing and creating
the arena), `solution_calibrate` (CUDA, timed: the idle device's flush), `solution_zygote_wait`
(what of the zygote's start the earlier phases did not hide), `solution_spawn` (the fork),
`solution_start`, `solution_setup` (with writing the weights), per case `solution_inputs`
(writing its inputs into the arena), `solution_cases` (the call) and `solution_outputs` (copying
the output out), then `solution_compare` (every output against the reference's, on the
evaluation's device), `solution_precheck` (the rest of the verdict so far), timing in four steps
(`solution_timing_setup`: the timing region, the echo's start, the graphs' capture and the input
sets; `solution_timing`: the timed calls; `solution_timing_evidence`: stopping both sides and the
profiled call; `solution_timing_close`: the witnesses, the figures and the echo's end), `solution_finish` and
`solution_close` (closing the links and unmapping the arena; after a lost session, resuming it
and asking how it ended). With 268 MB inputs the copies in and out of the arena are seconds that
belong to no call of the solution's. On a GPU shared with other evaluations, calibration and
timing take the GPU alone (`turns.timing`), and waiting for that turn is `solution_gpu_wait`.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...cases import CORRECTNESS, RECOMPUTE
from ...protocol.channel import ALIGN, Arena, Layout, Link, round_up, tensor_nbytes
from ...protocol.messages import Failed, Finish, Finished, RunCase, Setup, ShapeSetup, parse_reply
from ...record import Record
from ...request import EvalRequest
from ...solution.zygote import LOG_NAME
from ..reference import HostCopies, ReferenceRun, Widened, expected_on_device, release_cached
from ..session import CaseResult, ProcessPause, Session, SessionLost
from ..timing import TIMING_STEPS, SolutionTiming, TimingUnavailable, calibrate_idle, cpu_region_bytes, time_solution
from ..verdict import SolutionFacts, Verifier, compare_outputs, judge
from .echo_process import EchoProcess
from .phases import Laps
from .turns import ALONE, GpuTurns

EVIDENCE_CASES = 2  # cases (never the first, which compiles) picked at random for kernel evidence
# Step limits when the request gives none (`step_limits`).
START_LIMIT_S = 60.0
SETUP_LIMIT_S = 30.0
CASE_LIMIT_S = 15.0
FIRST_CASE_COMPILE_S = 20.0
WINDOW_LIMIT_S = 30.0
CAPTURE_COMPILE_S = 60.0  # a graph capture may compile the solution's kernels for its input sets
FINISH_LIMIT_S = 60.0
REFERENCE_FACTOR = 20.0
CPU_ADDRESS_SPACE = 16 << 30  # RLIMIT_AS of a CPU solution process
FILE_SIZE_LIMIT = 256 << 20  # RLIMIT_FSIZE of a solution process (a larger write kills it)
FLOOD_BYTES = 32 << 20  # more output than this on stdout/stderr fails the solution
CUDA_MEMORY_FRACTION = 0.9  # of the device, for the solution process


def flood(log: Path) -> str | None:
    """Why the solution process's output log ends the evaluation (a flood), or None."""
    try:
        size = log.stat().st_size
    except OSError:
        return None
    return f"wrote more than {FLOOD_BYTES >> 20} MiB to stdout/stderr" if size > FLOOD_BYTES else None


def _arena_size(ref: ReferenceRun, device: str) -> tuple[int, int, int, int]:
    """(input region, output region, CPU timing region, total) for this reference's cases; the
    doorbell's words come first (`timing.DOORBELL_OFFSET`), the regions from ALIGN on."""
    inputs = max(
        sum(tensor_nbytes(x) + ALIGN for x in run.inputs if isinstance(x, torch.Tensor)) for run in ref.cases.values()
    )
    state = sum(tensor_nbytes(t) + ALIGN for shape in ref.shapes.values() for t in shape.model.state_dict().values())
    outputs = max(tensor_nbytes(run.saved["expected"]) for run in ref.cases.values())
    input_region = round_up(max(inputs, state) + ALIGN)
    output_region = round_up(outputs + ALIGN)
    main = ref.cases[ref.order[0]]
    timing_region = cpu_region_bytes(main.inputs, main.saved["expected"]) if device == "cpu" else 0
    return input_region, output_region, timing_region, ALIGN + input_region + output_region + timing_region


@dataclass(frozen=True)
class StepLimits:
    """The supervisor's deadline for each step of a solution process, in seconds."""

    start: float
    setup: float
    case: float
    first_case: float  # the first call compiles the solution's kernels
    window: float
    capture: float  # capturing the timed calls' CUDA graphs (they may compile)
    finish: float = FINISH_LIMIT_S


def step_limits(request: EvalRequest, reference_s: float, cases: int) -> StepLimits:
    """Each step's limit: the request's `timeout_s` when given (every step, so `--timeout` is what a
    hang costs at most, whichever step hangs), else derived from the problem (the reference's time
    per case), so a solution that hangs at import or in forward fails within a minute while an
    honest one is never cut short."""
    if request.timeout_s is not None:
        t = float(request.timeout_s)
        return StepLimits(min(t, 300.0), t, t, t, t, t, min(t, FINISH_LIMIT_S))
    per_case = reference_s / max(cases, 1)
    case = min(CASE_LIMIT_S + REFERENCE_FACTOR * per_case, 300.0)
    compile_s = FIRST_CASE_COMPILE_S if request.device == "cuda" else 0.0
    window = case + WINDOW_LIMIT_S
    return StepLimits(START_LIMIT_S, SETUP_LIMIT_S, case, case + compile_s, window, window + CAPTURE_COMPILE_S)


def run_solution(
    zygote: Any,
    work: Path,
    scratch: Path,
    request: EvalRequest,
    ref: ReferenceRun,
    timing_seconds: float,
    rec: Record,
    scan: Any,
    turns: GpuTurns = ALONE,
) -> SolutionFacts:
    laps = Laps(rec, "candidate", "solution_arena")  # every second of the phase in one step
    facts = SolutionFacts()
    input_region, output_region, timing_region, total = _arena_size(ref, request.device)
    arena = Arena.create(total)
    limits = {
        "address_space_bytes": CPU_ADDRESS_SPACE if request.device == "cpu" else None,
        "file_size_bytes": FILE_SIZE_LIMIT,
    }
    links: list[Link] = []
    pauser: ProcessPause | None = None  # the solution's side, stopped between timed windows
    if request.device == "cuda" and request.time_solution:
        with _timing_turn(turns, laps):
            laps.to("solution_calibrate")
            calibrate_idle("cuda")  # before any solution process exists: what an idle device's flush costs

    def open_session(folder: Path, own_arena: Arena | None = None) -> Session:
        used = own_arena or arena
        spawned = zygote.spawn(scratch=folder, arena_fd=used.fd, arena_size=used.size, limits=limits)
        assert pauser is not None  # made once the zygote is ready
        pauser.add_member(spawned.pid)
        log = folder / LOG_NAME

        def flooded() -> str | None:
            return flood(log)

        link = Link(spawned.sock)
        links.append(link)
        if own_arena is not None:  # the echo: no case inputs or outputs
            return Session(link, own_arena, ALIGN, ALIGN, 0, pid=spawned.pid, watch=flooded, pauser=pauser)
        return Session(
            link, arena, ALIGN, ALIGN + input_region, output_region, pid=spawned.pid, watch=flooded, pauser=pauser
        )

    try:
        laps.to("solution_zygote_wait")  # a zygote still importing torch: its start not hidden
        zygote.wait_ready()
        pauser = ProcessPause(zygote.proc.pid)  # a zygote of the warm server has its pid only now
        laps.to("solution_spawn")  # the fork itself
        session = open_session(scratch)
        run = _Run(session, facts, scratch, request, ref, timing_seconds, rec, scan, open_session, work, laps, turns)
        run.cpu_region = (ALIGN + input_region + output_region, timing_region)
        try:
            run.drive()
        except SessionLost as lost:
            laps.to("solution_close")
            facts.lost = lost
            session.resume(check=False)  # a process paused between windows could not exit to say how it ended
            if not lost.timed_out:
                how = zygote.exit_status(session.pid)
                lost.reason += f" ({how})" if how else ""
    finally:
        laps.to("solution_close")
        try:
            for link in links:
                link.close()
            arena.close()
        finally:
            laps.stop()
    return facts


class _Run:
    """One solution process driven through setup, every planned case and timing."""

    def __init__(
        self, session, facts, scratch, request, ref, timing_seconds, rec, scan, open_session, work, laps, turns
    ):
        self.laps, self.turns = laps, turns
        self.session, self.facts, self.scratch, self.request, self.ref = session, facts, scratch, request, ref
        self.timing_seconds, self.rec, self.scan = timing_seconds, rec, scan
        self.open_session, self.work = open_session, work
        self.cpu_region = (0, 0)
        self.rng = random.SystemRandom()
        self.host = HostCopies(request.device)  # outputs page-locked: to the GPU fast for the comparison
        correctness = [n for n in ref.order if ref.cases[n].case.group == CORRECTNESS]
        self.correctness = correctness
        self.limits = step_limits(request, rec.phase_s.get("reference", 0.0), len(ref.order))
        self.echo = EchoProcess(
            open_session,
            lambda process, path: self._setup(process, path, with_state=False),
            work,
            self.limits.start,
        )  # forked before the cases

    def drive(self) -> None:
        """Setup, every planned case, timing, finish; each step's seconds go into `rec.phase_s`
        as `solution_<step>` (a step runs until the next one starts)."""
        try:
            self._drive()
        finally:
            self.echo.drop()

    def _drive(self) -> None:
        session, facts, request, ref, laps = self.session, self.facts, self.request, self.ref, self.laps
        facts.lost_during = "starting"
        laps.to("solution_start")
        ready = parse_reply(session.link.receive(self.limits.start))
        if ready.kind != "ready":
            raise SessionLost(f"the solution process answered {ready.kind!r} instead of ready")
        facts.sandbox = dict(ready.sandbox)
        facts.lost_during = "importing the solution"
        laps.to("solution_setup")
        reply = self._setup(session, str(self.scratch / "solution.py"), with_state=True)
        if isinstance(reply, Failed):
            facts.failed_stage, facts.error = reply.stage, reply.error
            return
        facts.class_name, facts.state_dict = reply.class_name, reply.state_dict
        facts.import_flag_changes, facts.tampered = reply.import_flag_changes, list(reply.tampered)
        if any(v for report in facts.state_dict.values() for v in (report or {}).values()):
            return  # the reference's weights do not load: nothing else is meaningful
        # Never the first call (it compiles, or on CPU prepares the interpreter) nor the second
        # shape (it compiles again): a sample must show the forward as it runs from then on.
        later = [n for n in ref.order[1:] if ref.cases[n].case.shape == "main"] or ref.order[:1]
        sampled = set(self.rng.sample(later, min(EVIDENCE_CASES, len(later))))
        if request.time_solution:
            self.echo.fork()
        for i, name in enumerate(ref.order):
            laps.to("solution_inputs")
            run = ref.cases[name]
            facts.lost_during = f"running case {name}"
            reuse = self.correctness[0] if run.case.group == RECOMPUTE else None
            message = RunCase(
                name,
                run.case.shape,
                session.write_inputs(run.inputs),
                session.slot(),
                reuse_buffers_of=reuse,
                evidence=name in sampled,
            )
            limit = self.limits.first_case if i == 0 else self.limits.case
            laps.to("solution_cases")
            reply, wall = session.request(message, limit, ("case_done",))
            if isinstance(reply, Failed):
                facts.failed_stage, facts.error = reply.stage, reply.error
                return
            if reply.case != name:
                raise SessionLost(f"the solution process answered for case {reply.case!r}, not {name!r}")
            laps.to("solution_outputs")
            facts.cases[name] = CaseResult(reply, session.read_output(reply.output, self.host.copy), wall)
            if name in sampled:
                facts.evidence_samples.append((f"case {name}", dict(reply.evidence)))
        laps.to("solution_compare")  # the outputs against the reference's, before any verdict reads them
        compare_outputs(facts, ref, request, self.rec.precision_used)
        if request.time_solution:
            laps.to("solution_precheck")
            skip = self._already_incorrect()
            if skip:
                facts.timing_skipped = skip
            else:
                facts.lost_during = "timing"
                try:
                    with _timing_turn(self.turns, laps, self.request.device):
                        laps.to(_timing_step("setup"))
                        facts.timing = time_solution(
                            self._timing(), self.timing_seconds, self.rng, mark=lambda step: laps.to(_timing_step(step))
                        )
                except TimingUnavailable as exc:
                    facts.timing_skipped = f"not timed: {exc}"
                if facts.timing is not None and facts.timing.evidence:
                    facts.evidence_samples.append(("a timed call", facts.timing.evidence))
                if facts.timing is not None:  # every observed timed call is judged as a case is
                    facts.evidence_samples += [(f"timed call {i + 1}", ev) for i, ev in enumerate(facts.timing.samples)]
        facts.lost_during = "finishing"
        laps.to("solution_finish")
        reply, _ = session.request(Finish(), self.limits.finish, ("finished",))
        if isinstance(reply, Finished):
            facts.tampered += [t for t in reply.tampered if t not in facts.tampered]

    def _setup(self, session: Session, path: str, with_state: bool) -> Any:
        layout = Layout(session.input_offset)
        shapes = {}
        for name, shape in self.ref.shapes.items():
            if not with_state and name != "main":
                continue
            state = session.write_state(shape.model.state_dict(), layout) if with_state else {}
            shapes[name] = ShapeSetup([_init_arg(a) for a in shape.module.get_init_inputs()], state)
        message = Setup(self.request.device, path, shapes, CUDA_MEMORY_FRACTION)
        reply, _ = session.request(message, self.limits.setup, ("setup_done",))
        return reply

    def _already_incorrect(self) -> str:
        """Why timing would be wasted (a check already failed), or ''."""
        trial = Record(device=self.request.device, precision_used=self.rec.precision_used)
        judge(trial, self.facts, self.ref, self.request, self.scan)
        if trial.correct:
            return ""
        return f"not timed: the solution is already {trial.status} ({trial.failed_check} failed)"

    def _timing(self) -> SolutionTiming:
        """What the timing room times the solution on: the correctness case that templates the
        timed calls, the rule each judged call is held to, and how to start the trusted echo."""
        ref, device = self.ref, self.request.device
        main = ref.cases[self.correctness[0]]
        widened = Widened(ref.shapes["main"].model)  # the float64 model, kept for this timing's judgements
        verifier = Verifier(
            lambda inputs, float64: expected_on_device(ref, inputs, device, float64, widened),
            main.entry,
            self.request.tolerance,
            ref.precision,
        )
        return SolutionTiming(
            session=self.session,
            start_process=self.echo.start,
            module=ref.shapes["main"].module,
            template=main.inputs,
            expected=main.saved["expected"],
            verifier=verifier,
            device=device,
            cpu_region=self.cpu_region,
            window_limit_s=self.limits.window,
            capture_limit_s=self.limits.capture,
        )


def _init_arg(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_init_arg(v) for v in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    raise TypeError(f"get_init_inputs() returned a {type(value).__name__}; only numbers, text and lists can be sent")


__all__ = ["run_solution", "step_limits", "StepLimits"]


@contextlib.contextmanager
def _timing_turn(turns: GpuTurns, laps: Laps, device: str = "cuda") -> Iterator[None]:
    """The GPU to this evaluation alone (`turns.timing`); waiting for it is `solution_gpu_wait`.
    Before the turn is given back, the memory its work left cached goes back to the driver
    (`release_cached`: a 268 MB problem's input sets), for whichever process allocates next."""
    if turns.shared:
        laps.to("solution_gpu_wait")
    with turns.timing():
        try:
            yield
        finally:
            release_cached(device)


def _timing_step(step: str) -> str:
    """The record's name of a timing step (`timing.TIMING_STEPS`): the timed calls keep the name
    the whole of timing had, `solution_timing`; the others are `solution_timing_<step>`."""
    assert step in TIMING_STEPS, step
    return "solution_timing" if step == "calls" else f"solution_timing_{step}"
