"""The reference side of an evaluation, computed in the supervisor where no solution can reach it.

The problem files are ours, so the reference runs in the trusted supervisor process itself. For
every planned case it builds the reference model (parameters and buffers re-randomized) and the
inputs, runs the model, and keeps in memory: the inputs (to send to the solution process), the
expected output (on a GPU evaluation's GPU while a budget allows: `placement`), and for cases
marked float64 the residual of a float64 run plus the reference's own error against float64 and,
for fp32 problems with matrix products or convolutions, the error an fp32 computation with
TF32-rounded inputs and weights would have (their precision floor). It also records which aten
ops the reference dispatches and for how long (the problem's main work, for the kernel rule) and,
on CUDA, the names of the kernels it launches (so the same kernels in a solution do not count as
its own). The main-shape model stays alive: the supervisor verifies timed outputs against it.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from ...cases import PARAM_SEED, Case, build_inputs, input_precision, other_shape_candidates, rerandomize, single_output
from ..verdict import all_finite
from .placement import HostCopies, SavedPlace

# The steps of the reference phase, in `Record.phase_s` as `reference_<step>`: what runs before
# `compute` (the cache key, the warm reference), then `compute`'s own.
WIDENED_MAX_BYTES = 2 << 30  # a float64 copy of the reference model kept for judging timed calls (`Widened`)
REFERENCE_STEPS = ("setup", "build", "profile", "other_shape", "inputs", "forward", "copy", "hash", "float64", "store")


def caches_float64(device: str) -> bool:
    """Whether the float64 facts and residuals go into the reference cache: on the CPU, where the
    float64 runs take seconds (14 s for a 268 MB LayerNorm on 2 cores); not on a GPU, where they
    took 0.16 s and caching them cost more: that problem's residuals stored in 3.6 s, read back
    and checked in 1.9 s, its inputs and outputs hashed in 1.4 s to pair them (issue 42)."""
    return device == "cpu"


def _round_tf32(x: torch.Tensor) -> torch.Tensor:
    """Truncate float32 values to TF32 (10 explicit mantissa bits), as tensor cores do when
    they are fed fp32 operands: the worst honest TF32 error, biased toward zero."""
    bits = x.contiguous().view(torch.int32)
    return (bits & -0x2000).view(torch.float32)


def _as_tensor(out: Any, where: str) -> torch.Tensor:
    out = single_output(out)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"{where}: the reference returned {type(out).__name__}, not one tensor")
    return out


def _errors(out: torch.Tensor, ref64: torch.Tensor, diff: torch.Tensor | None = None) -> dict[str, float]:
    """max|out-ref64| / max|ref64| and ||out-ref64|| / ||ref64||; `diff` is `ref64 - out` in
    float64 when the caller has it (IEEE subtraction is antisymmetric, so its magnitudes are
    exactly those of `out - ref64`)."""
    if diff is None:
        diff = out.double() - ref64
    scale = torch.linalg.vector_norm(ref64, math.inf).item() or 1.0  # max|ref64|, no |ref64| copy
    norm = ref64.norm().item() or 1.0
    return {"max_scaled": torch.linalg.vector_norm(diff, math.inf).item() / scale, "rel": diff.norm().item() / norm}


@torch.no_grad()
def float64_reference(
    model: torch.nn.Module, inputs: list[Any], out: torch.Tensor, tf32: bool, m64: torch.nn.Module | None = None
) -> dict[str, Any]:
    """The float64 run of the reference and the errors of the native and TF32-emulated runs;
    `m64`: the model already widened (`Widened`), else a copy is widened for this run."""

    def widen(x: Any, round_tf32: bool) -> Any:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            if round_tf32 and x.dtype == torch.float32:
                x = _round_tf32(x)
            return x.double()
        return x

    m64 = m64 if m64 is not None else copy.deepcopy(model).double()
    ref64 = _as_tensor(m64(*[widen(x, False) for x in inputs]), "float64 reference")
    if ref64.dtype != torch.float64 or ref64.shape != out.shape:
        return {"available": False, "reason": f"the reference's forward returns {ref64.dtype} under float64 inputs"}
    if not all_finite(ref64):
        return {"available": False, "reason": "the float64 reference has NaN/Inf"}
    # ref64 - out: the residual the checks add back, and (negated) the reference's own error.
    residual = ref64 - out.double()
    info: dict[str, Any] = {"available": True, "ref64": ref64, "residual": residual}
    info["ref_error"] = _errors(out, ref64, residual)
    if tf32:
        mt = copy.deepcopy(model).float()
        for t in list(mt.parameters()) + list(mt.buffers()):
            if t.dtype == torch.float32:
                t.copy_(_round_tf32(t))
        mt = mt.double()
        emulated = _as_tensor(mt(*[widen(x, True) for x in inputs]), "tf32-emulated reference")
        info["tf32_error"] = _errors(emulated, ref64)
    return info


def build_on_host(module_source: str, stem: str, sizes: dict[str, Any], seed: int = PARAM_SEED):
    """The problem's module and its model as constructed, on the CPU: host work only, so an
    evaluation does it before it takes the GPU. Constructors initialize on the host (level4/5's
    5.6 GB of experts took 16.9 s of it on an H100), and inside the turn that held the other
    evaluation's timing waiting (`solution_gpu_wait`, 36 s over a 54-problem batch)."""
    from ....catalog.materialize import load_module, make_model

    module = load_module(module_source, sizes, stem=stem)
    return module, make_model(module, "cpu", seed)


def _build(module_source: str, stem: str, sizes: dict[str, Any], device: str, seed: int, built: Any = None):
    """`built` (from `build_on_host`) or a new build, moved to `device` and given new parameter
    values there (`rerandomize`): the same values either way."""
    module, model = built if built is not None else build_on_host(module_source, stem, sizes, seed)
    model = model.to(device)
    rerandomize(model)
    return module, model


@dataclass
class ShapeRun:
    sizes: dict[str, Any]
    module: Any
    model: torch.nn.Module


@dataclass
class CaseRun:
    case: Case
    inputs: list[Any]  # on the CPU
    saved: dict[str, torch.Tensor]  # "expected" (and "residual64"): on the GPU within a budget (`SavedPlace`)
    entry: dict[str, Any]  # JSON facts: shape, dtype, finite, float64 errors


@dataclass
class ReferenceRun:
    precision: str
    shapes: dict[str, ShapeRun]
    cases: dict[str, CaseRun] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    kernel_names: list[str] = field(default_factory=list)
    ops: dict[str, list[float]] = field(default_factory=dict)  # op -> [count, seconds]
    matmul_flops: float = 0.0  # FLOPs of its matrix products and convolutions (CPU: main_work)
    device_info: dict[str, Any] = field(default_factory=dict)
    cached: bool | None = None  # the cached facts were used (None: no cache)

    @property
    def order(self) -> list[str]:
        return list(self.cases)

    def entries(self) -> dict[str, dict[str, Any]]:
        return {name: run.entry for name, run in self.cases.items()}


def compute(
    problem: Any,
    source: str,
    sizes: dict[str, Any],
    device: str,
    cases: list[Case],
    cache: Any = None,
    laps: Any = None,
    built: Any = None,
) -> ReferenceRun:
    """Run the reference on every case (see the module docstring). With a `cache`
    (`cache.ReferenceCache`), what it holds for this key replaces the profiled pass,
    the second-shape search and (on the CPU: `caches_float64`) the float64 runs of the cases it
    verifies, and what was computed is stored; `run.cached` says whether everything it keeps came
    from it. `laps` (`phases.Laps`) is told each step as it starts: `reference_<step>` in the
    record. `built`: the main shape's (module, model) from `build_on_host`, made before the GPU
    was taken; used once (the model moves to the device)."""
    from ...evidence import OpRecorder
    from ...fingerprint import device_info
    from .cache import digest, state_digest

    def step(name: str) -> None:
        assert name in REFERENCE_STEPS, name
        if laps is not None:
            if device == "cuda":  # the GPU work queued so far belongs to the step that queued it
                torch.cuda.synchronize()
            laps.to(f"reference_{name}")

    step("build")
    hit = cache.load() if cache is not None else None
    meta = hit.meta if hit is not None else {}
    module, model = _build(source, problem.name, sizes, device, seed=PARAM_SEED, built=built)
    main_inputs = build_inputs(module, cases[0], device)
    run = ReferenceRun(input_precision(main_inputs), {"main": ShapeRun(dict(sizes), module, model)})
    states = {"main": state_digest(model)} if cache is not None else {}
    usable = hit is not None and meta["states"].get("main") == states.get("main")  # the same model
    # The first case's forward: the profiled pass on a miss, else the case loop's (one per case).
    first: tuple[list[Any], Any] | None = None
    if usable:
        run.ops, run.kernel_names = dict(meta["ops"]), list(meta["kernel_names"])
        run.matmul_flops = float(meta["matmul_flops"])
    else:
        step("profile")
        with torch.no_grad():
            recorder = OpRecorder()
            with recorder:
                if device == "cuda":  # what the reference launches is library code, whatever its name
                    from ...kernels import profile_cuda_kernels

                    raw_out, names = profile_cuda_kernels(lambda: model(*main_inputs))
                    run.kernel_names = names or []
                else:
                    raw_out = model(*main_inputs)
            run.ops = recorder.summary()
            main_out = _as_tensor(raw_out, problem.problem_id)
        first = (main_inputs, raw_out)
        if device == "cpu":  # the CPU main-work rule compares the solution's tl.dot FLOPs with these
            # A pass of its own: FlopCounterMode decomposes some ops, which the profiled pass and
            # the first case's output must not see. On copies of the inputs, which the first case
            # sends as they are now. Cached, so a hit skips it.
            from torch.utils.flop_counter import FlopCounterMode

            copies = [x.clone() if isinstance(x, torch.Tensor) else x for x in main_inputs]
            with torch.no_grad(), FlopCounterMode(display=False) as counter:
                model(*copies)
            del copies
            run.matmul_flops = float(counter.get_total_flops())
    # TF32 is what tensor cores do to fp32 matrix products; a problem without one (a softmax, a
    # norm) has no honest TF32 path, so its precision floor is the reference's own error alone.
    from ..verdict import forbidden_ops

    matrix_ops = bool(forbidden_ops(run.ops))
    if any(c.shape == "other" for c in cases):
        step("other_shape")
        if usable:
            other = meta["other_sizes"]
            chosen = None if other is None else (other, *_build(source, problem.name, other, device, PARAM_SEED + 1))
        else:
            chosen = _choose_other_shape(problem, source, sizes, device, tuple(main_out.shape), cases)
        if chosen is None:
            run.notes.append("no second shape: no size override gave a different, valid shape")
            cases = [c for c in cases if c.shape != "other"]
        else:
            other_sizes, other_module, other_model = chosen
            run.shapes["other"] = ShapeRun(other_sizes, other_module, other_model)
            if cache is not None:
                states["other"] = state_digest(other_model)
                usable = usable and meta["states"].get("other") == states["other"]
    reused = usable  # every float64 case below comes from the cache too
    keeps_float64 = cache is not None and caches_float64(device)
    place, host = SavedPlace(device).place, HostCopies(device).on_host
    stored: dict[str, Any] = {}
    residuals: dict[str, torch.Tensor] = {}
    for i, case in enumerate(cases):
        shape = run.shapes[case.shape]
        if i == 0 and first is not None:  # the profiled pass ran this case: its inputs, its output
            inputs, raw = first
        else:
            step("inputs")
            inputs = main_inputs if i == 0 else build_inputs(shape.module, case, device)
            step("forward")
            with torch.no_grad():
                raw = shape.model(*inputs)
        step("copy")
        out = _as_tensor(raw, f"{problem.problem_id} {case.name}")
        entry: dict[str, Any] = {
            "case": case.to_dict(),
            "shape": list(out.shape),
            "dtype": str(out.dtype),
            "finite": all_finite(out),
        }
        saved: dict[str, torch.Tensor] = {"expected": place(out)}
        cpu_inputs = [host(x) if isinstance(x, torch.Tensor) else x for x in inputs]  # for the arena
        if case.float64 and out.is_floating_point() and entry["finite"]:
            facts, known, residual = {}, None, None
            if keeps_float64:
                step("hash")
                facts = {"inputs": digest(cpu_inputs), "expected": digest([saved["expected"]])}
                known = meta["cases"].get(case.name) if usable else None
                residual = hit.tensors.get(f"{case.name}/residual64") if known is not None else None
            if (
                known is not None
                and all(known.get(k) == v for k, v in facts.items())  # the same inputs and outputs, bit for bit
                and isinstance(known.get("float64"), dict)
                and (residual is not None) == bool(known.get("residual64"))
                and (residual is None or residual.shape == out.shape)
            ):
                entry["float64"] = known["float64"]
                if residual is not None:
                    saved["residual64"] = place(residual)
            else:
                reused = reused and not keeps_float64
                step("float64")
                try:
                    tf32 = out.dtype == torch.float32 and matrix_ops
                    info = float64_reference(shape.model, inputs, out, tf32=tf32)
                except Exception as exc:  # an op without a float64 kernel
                    info = {
                        "available": False,
                        "reason": f"float64 reference failed: {type(exc).__name__}: {exc}"[:300],
                    }
                if info.pop("available"):
                    info.pop("ref64")
                    saved["residual64"] = place(info.pop("residual").float())
                entry["float64"] = _finite_json(info)
            if keeps_float64:
                stored[case.name] = {**facts, "float64": entry["float64"], "residual64": "residual64" in saved}
                if "residual64" in saved:
                    residuals[f"{case.name}/residual64"] = saved["residual64"]
        run.cases[case.name] = CaseRun(case, cpu_inputs, saved, entry)
    step("store")
    run.device_info = device_info(device)
    if cache is not None:
        run.cached = reused
        if not reused:
            other = run.shapes.get("other")
            cache.store(
                {
                    "ops": run.ops,
                    "kernel_names": run.kernel_names,
                    "matmul_flops": run.matmul_flops,
                    "other_sizes": None if other is None else other.sizes,
                    "states": states,
                    "cases": stored,
                },
                residuals,
            )
    return run


class Widened:
    """A model's float64 copy for the judged timed calls, made once on first use when its
    parameters and buffers take at most WIDENED_MAX_BYTES in float64 (else None: each judgement
    widens a copy of its own, as before). Widening a copy per judged call cost a deep copy and a
    conversion of every weight each time; held by the timing that uses it, and dropped with it."""

    def __init__(self, model: torch.nn.Module, max_bytes: int = WIDENED_MAX_BYTES):
        self.model, self.max_bytes = model, max_bytes
        self._m64: torch.nn.Module | None = None
        self._decided = False

    def get(self) -> torch.nn.Module | None:
        if not self._decided:
            self._decided = True
            tensors = list(self.model.parameters()) + list(self.model.buffers())
            if sum(8 * t.numel() for t in tensors) <= self.max_bytes:
                self._m64 = copy.deepcopy(self.model).double()
        return self._m64


def expected_on_device(
    run: ReferenceRun, inputs: list[Any], device: str, float64: bool = False, widened: Widened | None = None
) -> dict[str, Any]:
    """The main-shape reference's saved tensors on `inputs`, left on `device`: "expected" and,
    when `float64` and the problem has a float64 reference (its first case kept a residual),
    "residual64", so a timed call is judged by exactly the rules of a correctness case.
    `widened`: the main model's float64 copy, kept across the calls of one timing."""
    moved = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    model = run.shapes["main"].model
    with torch.no_grad():
        out = _as_tensor(model(*moved), "reference").detach()
    saved: dict[str, Any] = {"expected": out}
    if float64 and "residual64" in run.cases[run.order[0]].saved:
        info = float64_reference(model, moved, out, tf32=False, m64=widened.get() if widened is not None else None)
        if info.get("available"):
            saved["residual64"] = info["residual"].float()
    return saved


def _choose_other_shape(problem, source, sizes, device, main_shape, cases):
    seed_case = next(c for c in cases if c.shape == "other")
    for candidate in other_shape_candidates(problem, sizes):
        try:
            module, model = _build(source, problem.name, candidate, device, seed=PARAM_SEED + 1)
            with torch.no_grad():
                out = _as_tensor(model(*build_inputs(module, seed_case, device)), "other shape")
        except Exception:
            continue
        if tuple(out.shape) != main_shape and (not out.is_floating_point() or torch.isfinite(out).all()):
            return candidate, module, model
    return None


def _finite_json(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_json(v) for v in value]
    return value
