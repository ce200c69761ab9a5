"""The baseline child's side (`python -m ...reference.child baseline DIR`): the reference built,
compiled with torch.compile(mode="reduce-overhead"), then timed eager and compiled inside one
hold of a timing lock (`child_main`), and the seconds of each of its steps (`CHILD_STEPS`,
`child_steps`). The parent's side (the key, the cache, running the child) is `baseline`."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from ... import compile_memos
from ..timing import time_reference


@contextlib.contextmanager
def timing_lock(path: str | None):
    """Hold an exclusive lock on `path` (when given) so that several baseline processes sharing
    one GPU compile concurrently but never time concurrently."""
    if not path:
        yield
        return
    import fcntl

    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def child_main(spec: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """Time the reference eager and compiled by the method solutions are scored by
    (`timing.time_reference`). All that comes before the timing (the start, the build, compiling:
    the compiled model's first calls) runs before the timing lock is taken, so it may overlap other
    work (another baseline's timing, an evaluation's reference phase); both timings run inside one
    hold of the lock, so they overlap nothing that holds it. A compile failure leaves eager as the
    baseline."""
    import torch

    from ....catalog.materialize import load_module, make_model
    from ...cases import CORRECTNESS, PARAM_SEED, Case, build_inputs, input_precision

    marks = {"start": time.monotonic()}  # when each step ended (CHILD_STEPS), on the machine's clock
    if spec.get("compile", True):
        import_compiler()
        marks["import"] = time.monotonic()
    device = spec["device"]
    module = load_module(Path(spec["problem_path"]), spec["sizes"])
    model = make_model(module, device, PARAM_SEED)
    template = build_inputs(module, Case(f"seed{spec['seeds'][0]}", CORRECTNESS, "main", spec["seeds"][0]), device)
    seconds = float(spec.get("timing_seconds", 10.0))
    marks["build"] = time.monotonic()

    result: dict[str, Any] = {"precision": input_precision(template)}
    compiled, compile_error = None, None
    if spec.get("compile", True):
        try:
            compiled = _compiled(model, template)
        except Exception as exc:  # compile failures leave eager as the baseline
            compile_error = f"{type(exc).__name__}: {exc}"[:500]
        marks["compile"] = time.monotonic()
    with torch.no_grad(), timing_lock(spec.get("timing_lock")):
        marks["wait"] = time.monotonic()
        result["eager"] = time_reference(model, module, template, device, seconds)
        marks["eager"] = time.monotonic()
        if compiled is not None:
            try:
                timed = time_reference(compiled, module, template, device, seconds, gate=False)
                result["compiled"] = {**timed, "compile_mode": "reduce-overhead, called as a user calls it"}
            except Exception as exc:
                compile_error = f"{type(exc).__name__}: {exc}"[:500]
            marks["compiled"] = time.monotonic()
    if compile_error is not None:
        result["compile_error"] = compile_error
    result["marks"] = marks
    return result


def import_compiler() -> None:
    """torch.compile's own imports (dynamo, inductor), which its first call would make, and the
    hash of torch's sources that keys inductor's caches (`compile_memos.warm_inductor`: 0.3 s a
    process; the baseline server's forks inherit it): their seconds of a cold baseline are a
    step of their own (`import`), apart from compiling."""
    import torch._dynamo  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401

    compile_memos.warm_inductor()


def _compiled(model: Any, template: list[Any]) -> Any:
    """torch.compile(mode="reduce-overhead") of `model`, compiled and its CUDA graphs recorded by
    three calls. Timed afterwards as a user calls it: each call copies its new inputs into the
    graphs' static buffers and replays them, and that copy is part of its time, as in the seed's
    harness and the published runs."""
    import torch

    compiled = torch.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(3):
            compiled(*template)
    return compiled


# The steps of a baseline timed now, in `Record.phase_s` as `baseline_<step>`: the child's start
# (the interpreter and its imports, torch among them, up to `child_main`), torch.compile's imports
# (when it compiles), building the model and inputs, compiling (the first calls of the compiled model), waiting for the timing lock (another
# baseline's timing, or the evaluation's reference phase), timing eager, timing compiled, and its
# exit (writing the result, reaping the process group); `baseline_rest` is the phase's remainder
# in the evaluation. Marks are `time.monotonic()`, one clock for the whole machine.
CHILD_STEPS = ("start", "import", "build", "compile", "wait", "eager", "compiled", "exit")


def child_steps(outcome: Any, *, since: float | None = None, until: float | None = None) -> dict[str, float] | None:
    """Seconds per step of a baseline child (`CHILD_STEPS`), from its marks and the launch and
    end its parent saw (`isolate.ChildOutcome`); None without them. Given `since` and/or `until`
    (moments on the same clock), only each step's seconds between them."""
    marks = (outcome.result or {}).get("marks")
    if outcome.started_at is None or not isinstance(marks, dict) or "start" not in marks:
        return None
    ends = {k: float(marks[k]) for k in CHILD_STEPS[:-1] if k in marks}
    ends["exit"] = outcome.started_at + outcome.wall_s
    lo = float("-inf") if since is None else since
    hi = float("inf") if until is None else until
    steps, previous = {}, outcome.started_at
    for name, end in ends.items():
        end = max(previous, end)
        steps[name] = round(max(0.0, min(end, hi) - max(previous, lo)), 3)
        previous = end
    return steps
