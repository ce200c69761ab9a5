"""One evaluation, run by the trusted supervisor: reference, baseline, solution process, verdict.

The supervisor is the process that calls `evaluate`; it never imports the solution. It reads the
problem's source once (and materializes only from those bytes), computes the reference in
itself, gets the baseline from the cache or a baseline child (reference code only: started ahead
of the reference phase to compile beside it, timing only once that phase is over and holding the
evaluation until it is done, `reference.BaselineAhead`), then has the
zygote fork a fresh sandboxed solution process and drives it (`candidate`: setup, every planned
case, the kernel-evidence pass, timing by `timing.time_solution`). Inputs go out and outputs
come back as raw bytes in a shared arena; the verdict (`verdict.judge`) and the reported time are
decided here. Each phase's seconds go into `Record.phase_s` (`phases`). Every step has a
deadline on the supervisor's clock, and when the evaluation ends the solution process and
everything it spawned are killed. On a GPU shared with other evaluations (`turns`: a batch's
workers) the reference phase shares it, a cold baseline and the solution process each wait for
their turn (`reference_gpu_wait`, `gpu_wait`), and the solution lock is held from before the
fork to after the reap.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import tempfile
import time
from pathlib import Path
from typing import Any

from ....vocab import runs_gpu_name
from ... import mps
from ...cases import Case, plan_cases
from ...fingerprint import device_name, software
from ...record import SCHEMA_VERSION, SKIP, Record, is_phase_step
from ...request import DEFAULT_TIMING_SECONDS, EvalRequest
from ...solution.zygote import LOG_NAME, Zygote
from ..reference import (
    BaselineAhead,
    ReferenceRun,
    build_on_host,
    compute,
    for_evaluation,
    key_fields,
    recall_warm,
    release_cached,
    remember_warm,
    request_job,
    warm_key,
)
from ..session import SessionLost
from ..verdict import fill_timing, judge
from .candidate import flood, run_solution
from .phases import Laps, beside, phase, split
from .turns import ALONE, GpuTurns
from .zygote_pool import POOL

REDUCED_NOTE = "no sizes given on CPU: used the problem's REDUCED_SIZES (default shapes are GPU-sized)"


def run_evaluation(
    request: EvalRequest, *, problems_dir=None, cache_dir=None, gpu_turns: GpuTurns | None = None
) -> Record:
    from ....catalog.problem import default_problems_dir, get_problem

    started = time.monotonic()
    if request.device == "cuda" and (lost := mps.cuda_context_lost()):
        raise mps.CudaContextLost(lost)
    root = Path(problems_dir) if problems_dir is not None else default_problems_dir()
    problem = get_problem(request.problem_id, root)
    source_bytes = problem.path.read_bytes()  # read once: nothing later re-reads the file
    solution = Path(request.solution_path).resolve()
    if not solution.is_file():
        raise FileNotFoundError(f"solution file {solution} does not exist")
    solution_bytes = solution.read_bytes()
    rec = Record(
        model=request.model,
        gpu=runs_gpu_name(request.gpu),
        level=problem.level,
        problem=problem.file_name,
        op_type=problem.op_type,
        problem_id=problem.problem_id,
        problem_sha256=hashlib.sha256(source_bytes).hexdigest(),
        solution_path=str(solution),
        solution_sha256=hashlib.sha256(solution_bytes).hexdigest(),
        device=request.device,
        ran_on=device_name(request.device),
        seeds=list(request.seeds),
        tolerance_mode=request.tolerance,
        custom_kernel_required=request.require_custom_kernel,
        started_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    )
    rec.fingerprint = software()
    sizes = request.size_overrides
    if request.device == "cpu" and not sizes and problem.reduced_sizes:
        sizes, rec.sizes_note = problem.reduced, REDUCED_NOTE
    rec.sizes = dict(sizes)
    try:
        if request.device == "cpu" and problem.cpu_unsupported:
            return rec.fail("error", f"{problem.problem_id} cannot run on CPU: {problem.cpu_unsupported}")
        syntax = _syntax_error(solution_bytes, Path(request.solution_path))
        if syntax:  # found before the reference runs: seconds, not the reference's time
            if request.scan_source:
                rec.check("source_scan", SKIP, "the source does not parse: see the import check")
            rec.fail("failed", syntax, check="import")
            rec.compiled = False
            return rec
        with tempfile.TemporaryDirectory(prefix="kbv3-eval-") as tmp:
            turns = gpu_turns or ALONE
            source = source_bytes.decode("utf-8")
            _evaluate(Path(tmp), request, problem, source, solution_bytes, sizes, rec, cache_dir, turns)
        return rec
    finally:
        rec.duration_s = round(time.monotonic() - started, 3)
        # What no phase holds: reading the files, the record itself, removing the work folder.
        named = sum(v for k, v in rec.phase_s.items() if not is_phase_step(k))
        rec.phase_s["bookkeeping"] = round(max(0.0, rec.duration_s - named), 3)


def _evaluate(
    work: Path,
    request: EvalRequest,
    problem: Any,
    source: str,
    solution_bytes: bytes,
    sizes: dict[str, Any],
    rec: Record,
    cache_dir: Any,
    turns: GpuTurns,
) -> None:
    with phase(rec, "setup"):
        scan = None
        if request.scan_source:
            from ..verdict import scan as scan_source

            scan = scan_source(solution_bytes.decode("utf-8", "replace"))
        zygote = POOL.get(request.device) or Zygote(request.device, work / "zygote.log")  # imports torch meanwhile
    ahead: BaselineAhead | None = None
    turn = contextlib.ExitStack()  # the GPU turn of the work before the solution process (`turns`)
    solution_turn = contextlib.ExitStack()  # held from before the solution's fork to after its reap
    try:
        timing_seconds = request.timing_seconds or DEFAULT_TIMING_SECONDS[request.device]
        if request.time_solution and request.wants_baseline:  # not on the CPU unless asked
            with phase(rec, "baseline"):
                job = request_job(request, problem, source, sizes, cache_dir, timing_seconds)
                ahead = BaselineAhead(job, work, launch=False)  # only looks in the cache
        plan = plan_cases(request.seeds, request.other_shape)
        laps = Laps(rec, "reference", "reference_setup")  # `compute` names its steps (REFERENCE_STEPS)
        try:
            fields = key_fields(rec.problem_sha256, sizes, request.device, plan, SCHEMA_VERSION)
            kept = warm_key(fields)
            ref = recall_warm(kept)
            reference_cached = True if ref is not None else None
            cold = ahead is not None and ahead.cold  # its child compiles and times: the GPU alone
            built = None
            if ref is None:  # host work, before the GPU is taken: the other's timing goes on meanwhile
                laps.to("reference_build")
                built = build_on_host(source, problem.name, sizes)
                laps.to("reference_setup")
            if ref is None or cold:
                _take(turn, turns.trusted(alone=cold), turns, laps)
            if ahead is not None:
                ahead.launch()  # a cold baseline's child starts now, to compile beside the reference
            if ref is None:
                cache = for_evaluation(cache_dir, fields)
                ref = _compute(problem, source, sizes, request.device, plan, cache, laps, turn, turns, cold, built)
                reference_cached = ref.cached
                remember_warm(kept, ref)
                # Inside the turn (freeing device memory is device work, never beside a timing), and
                # before a cold baseline's child times: it allocates only from what is free, and on
                # an H100 level3/31's baseline ran out of memory beside the 56 GB these passes kept.
                release_cached(request.device)
        except Exception as exc:
            rec.fail("error", f"the reference could not be evaluated: {type(exc).__name__}: {exc}"[:2000])
            return
        finally:
            laps.stop()
            if ahead is not None:
                ahead.release()  # the reference is done: the baseline child may time now
        rec.precision_used, rec.reference_cached = ref.precision, reference_cached
        rec.fingerprint.update(ref.device_info)
        if not ref.cases[f"seed{request.seeds[0]}"].entry["finite"]:
            rec.fail("error", "the reference output has NaN/Inf at these sizes")
            return
        base: dict[str, Any] = {}
        if ahead is not None:  # the solution waits for the baseline's child: its timing overlaps nothing
            with phase(rec, "baseline"):
                base = ahead.result()
            split(rec, "baseline", base.get("steps_s"))  # a baseline timed now: its child's steps waited for
            beside(rec, "baseline", base.get("steps_beside_s"))  # and those run beside the reference
        turn.close()
        scratch = work / "solution"
        scratch.mkdir(mode=0o700)
        (scratch / "solution.py").write_bytes(solution_bytes)
        if turns.shared:  # the other evaluation's solution process, if any, is reaped first
            with phase(rec, "gpu_wait"):
                solution_turn.enter_context(turns.solution())
        # `candidate` is the sum of the solution process's steps, which run_solution times itself.
        facts = run_solution(zygote, work, scratch, request, ref, timing_seconds, rec, scan, turns)
        with phase(rec, "verdict"):
            rec.log_tail, flooded = _log_tail(scratch / LOG_NAME, request.max_log_bytes)
            if flooded:
                facts.lost = facts.lost or SessionLost(flooded)
                facts.lost_during = facts.lost_during or "running"
            rec.sandbox = str(facts.sandbox.get("kind", "none"))
            rec.sandbox_details = facts.sandbox
            if rec.sandbox == "none":
                rec.warnings.append(
                    "no_sandbox: the solution process ran without a sandbox on this platform, so its "
                    "writes to caches and files were not prevented (see the README's threat model)"
                )
            judge(rec, facts, ref, request, scan)
            fill_timing(rec, facts, base, request)
    finally:
        with phase(rec, "cleanup"):
            if ahead is not None:
                ahead.stop()  # an evaluation that ended early leaves no baseline child and no held lock
            turn.close()
            try:
                _reap(zygote, request.device, rec)
            finally:
                solution_turn.close()  # every process of the solution is gone


def _reap(zygote: Zygote, device: str, rec: Record) -> None:
    """Kill every process the solution left; a zygote that cannot reap is not reused."""
    try:
        leftovers = zygote.reap()
        if leftovers:
            rec.warnings.append(f"leftover_processes: {leftovers} process(es) the solution left were killed")
    except Exception:
        POOL.drop(device)
        zygote.close()
    if not POOL.holds(zygote):
        zygote.close()


def _take(
    held: contextlib.ExitStack, granted: contextlib.AbstractContextManager[None], turns: GpuTurns, laps: Laps
) -> None:
    """Wait for a GPU turn (its seconds in `reference_gpu_wait`) and hold it in `held`."""
    if turns.shared:
        laps.to("reference_gpu_wait")
    held.enter_context(granted)
    if turns.shared:
        laps.to("reference_setup")


def _compute(
    problem: Any,
    source: str,
    sizes: dict[str, Any],
    device: str,
    plan: list[Case],
    cache: Any,
    laps: Laps,
    turn: contextlib.ExitStack,
    turns: GpuTurns,
    alone: bool,
    built: Any = None,
) -> ReferenceRun:
    """The reference (`reference.compute`, on the model `built` on the host). On a shared GPU it
    may have run beside the other evaluation's solution process, which can hold memory it needed
    or (under MPS) fault the device: a failure there is not this evaluation's, so it runs once
    more with the GPU alone, on a new build (the first one's model went to the device)."""
    try:
        return compute(problem, source, sizes, device, plan, cache, laps, built)
    except Exception:
        if not turns.shared or alone:
            raise
    turn.close()
    _take(turn, turns.trusted(alone=True), turns, laps)
    return compute(problem, source, sizes, device, plan, cache, laps)


def _syntax_error(source: bytes, path: Path) -> str:
    """Python's complaint about a solution that does not parse, naming the user's file, or ''."""
    try:
        compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f'File "{path}", line {exc.lineno}: SyntaxError: {exc.msg}'
    except ValueError as exc:  # a NUL byte
        return f"{path}: {exc}"
    return ""


def _log_tail(path: Path, limit: int) -> tuple[str, str | None]:
    """The last `limit` bytes of the solution process's output, and why it flooded (or None)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", "replace"), flood(path)
    except OSError:
        return "", None


__all__ = ["run_evaluation"]
