"""The candidate child: runs the solution and reports facts, never verdicts.

Everything the solution could influence is prepared before its import: the problem modules
(trusted), every input set (checked against the reference child's fingerprints), the
re-randomized state dicts, the Triton launch counter, and snapshots of global flags, RNG and of
the namespaces a cheat would monkeypatch. The solution never sees an expected output: its
outputs go to files the parent compares. Facts reported: state-dict compatibility, input
mutation, output aliasing of inputs/parameters, flag changes during forward, tampered
namespaces, Triton launches and (CUDA) profiler kernel names, timing with a re-check of the
timed outputs against the untimed ones, and timing on fresh inputs (`fresh`): the `timed_fresh`
case is never run untimed; its output from the last fresh timed call goes to the parent.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import torch

from . import cases as C
from . import fresh as F
from . import guard, kernels, timing


class Stop(Exception):
    """The solution failed at `stage`; the evaluation of it ends here."""

    def __init__(self, stage: str, message: str):
        super().__init__(message)
        self.stage = stage


def _error_text(exc: BaseException) -> str:
    tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
    return f"{type(exc).__name__}: {exc}"[:500] + "\n" + tail[-3000:]


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _span(t: torch.Tensor) -> tuple[int, int, int]:
    storage = t.untyped_storage()
    return (t.device.index or 0, storage.data_ptr(), storage.data_ptr() + storage.nbytes())


def _aliases(out: torch.Tensor, others: dict[str, torch.Tensor]) -> list[str]:
    """Names of the tensors whose storage the output shares or overlaps (views included)."""
    if out.untyped_storage().nbytes() == 0:
        return []
    dev, lo, hi = _span(out)
    hits = []
    for name, t in others.items():
        if t.device != out.device or t.untyped_storage().nbytes() == 0:
            continue
        d2, lo2, hi2 = _span(t)
        if d2 == dev and lo < hi2 and lo2 < hi:
            hits.append(name)
    return hits


def _held_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The parameters and buffers (persistent or not) the module holds."""
    held = {f"parameter {k}": p for k, p in model.named_parameters()}
    held.update({f"buffer {k}": b for k, b in model.named_buffers()})
    return held


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (a.isnan() & b.isnan())).all().item())
    return bool(torch.equal(a, b))


def _solution_class(module: Any) -> tuple[str, type]:
    for name in ("ModelNew", "Model"):
        cls = getattr(module, name, None)
        if isinstance(cls, type) and issubclass(cls, torch.nn.Module):
            return name, cls
    raise Stop("import", "the solution defines neither `Model` nor `ModelNew` (an nn.Module subclass)")


def _check_state_dict(sol: torch.nn.Module, ref_state: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Strict compatibility: every reference key present with its shape; extra buffers allowed,
    extra parameters not (they could not receive the reference's values)."""
    own = sol.state_dict()
    params = dict(sol.named_parameters())
    missing = [k for k in ref_state if k not in own]
    wrong = [f"{k}: {tuple(own[k].shape)} vs {tuple(v.shape)}" for k, v in ref_state.items() if k in own and own[k].shape != v.shape]
    extra_params = [k for k in params if k not in ref_state]
    report = {"missing": missing, "wrong_shape": wrong, "extra_parameters": extra_params, "not_loaded": []}
    if missing or wrong or extra_params:
        return report
    sol.load_state_dict(ref_state, strict=False)
    after = sol.state_dict()
    report["not_loaded"] = [k for k, v in ref_state.items() if not _same(after[k].detach().cpu(), v)]
    return report


def main(spec: dict[str, Any], workdir: Path, nonce: str) -> dict[str, Any]:
    from ..materialize import import_file, load_module, seed_everything

    device = spec["device"]
    facts: dict[str, Any] = {"nonce": nonce, "stage": "setup", "cases": {}}
    log = kernels.LaunchLog()
    facts["triton_wrapped"] = kernels.install_triton_launch_counter(log)
    ref_cases: dict[str, Any] = spec["reference"]["cases"]
    order = [C.Case.from_dict(ref_cases[n]["case"]) for n in spec["reference"]["case_order"]]

    # Everything trusted happens before the solution is imported.
    shapes: dict[str, Any] = {}
    for name, info in spec["reference"]["shapes"].items():
        module = load_module(Path(spec["problem_path"]), info["sizes"])
        state = torch.load(workdir / f"state_{name}.pt", weights_only=True)
        shapes[name] = {"module": module, "state": state}
    inputs: dict[str, list[Any]] = {}
    for case in order:
        built = C.build_inputs(shapes[case.shape]["module"], case, device)
        if C.fingerprint(built) != ref_cases[case.name]["inputs"]:
            raise RuntimeError(f"case {case.name}: inputs differ from the reference child's")
        inputs[case.name] = built
    timing_sets = [C.build_inputs(shapes["main"]["module"], c, device) for c in order if c.group == C.CORRECTNESS][:4]
    partner = C.build_inputs(shapes["main"]["module"], C.Case("fresh_partner", C.TIMED_FRESH, "main", C.FRESH_SEED), device)
    # Patches torch makes lazily (on import of torch._dynamo, on the first torch.compile call):
    # make them now, so they are not taken for the solution's monkeypatching.
    guard.settle_lazy_torch_patches()

    flags = guard.read_flags()
    rng = guard.save_rng()
    before = guard.snapshot_namespaces()

    try:
        facts["stage"] = "import"
        try:
            solution = import_file(Path(spec["solution_path"]), "kbv3_solution")
        except BaseException as exc:  # SystemExit and KeyboardInterrupt included
            raise Stop("import", _error_text(exc)) from None
        facts["import_flag_changes"] = guard.restore_flags(flags)
        guard.restore_rng(rng)
        facts["tampered_at_import"] = guard.tampered(before)
        facts["class"], cls = _solution_class(solution)

        facts["stage"] = "construct"
        models: dict[str, torch.nn.Module] = {}
        facts["state_dict"] = {}
        for name, shape in shapes.items():
            try:
                seed_everything(C.PARAM_SEED)
                model = cls(*shape["module"].get_init_inputs()).to(device).eval()
            except BaseException as exc:
                raise Stop("construct", _error_text(exc)) from None
            facts["state_dict"][name] = _check_state_dict(model, shape["state"])
            models[name] = model

        facts["stage"] = "run"
        for case in (c for c in order if c.group != C.TIMED_FRESH):
            facts["cases"][case.name] = _run_case(case, models[case.shape], inputs, device, log, flags, workdir, facts)
        facts["triton_launches"], facts["triton_kernels"] = log.count, list(log.names)

        if spec.get("time_solution"):
            facts["stage"] = "timing"
            facts.pop("_previous_output", None)
            untimed = facts.pop("_untimed", {})
            final = next((inputs[c.name] for c in order if c.group == C.TIMED_FRESH), None)
            buffers = 1 if device == "cpu" else F.buffer_count(timing_sets[0])
            fresh = F.FreshInputs(timing_sets[: 2 if device == "cpu" else 4], partner, final, buffers) if final else None
            facts["timing"] = _time(models["main"], timing_sets, list(untimed.values())[: len(timing_sets)], device, spec, fresh)
            if fresh is not None:
                _save_timed_fresh(fresh, workdir, facts["timing"])
        facts["tampered"] = guard.tampered(before)
        facts["stage"] = "done"
    except Stop as stop:
        facts["failed_stage"], facts["error"] = stop.stage, str(stop)
    except BaseException as exc:
        facts["failed_stage"], facts["error"] = facts["stage"], _error_text(exc)
    facts.pop("_untimed", None)
    facts.pop("_previous_output", None)
    facts.pop("kernel_names_done", None)
    facts.setdefault("triton_launches", log.count)
    facts.setdefault("triton_kernels", list(log.names))
    return facts


def _run_case(case, model, inputs, device, log, flags, workdir, facts) -> dict[str, Any]:
    # The recompute case reuses the buffers of the first case (the first correctness seed).
    args = inputs[next(iter(inputs))] if case.group == C.RECOMPUTE else inputs[case.name]
    if case.group == C.RECOMPUTE:
        # Same buffers as the first correctness case, new values: outputs must follow them.
        fresh = inputs[case.name]
        with torch.no_grad():
            for dst, src in zip(args, fresh):
                if isinstance(dst, torch.Tensor):
                    dst.copy_(src)
    originals = [x.clone() if isinstance(x, torch.Tensor) else x for x in args]
    first = not facts.get("kernel_names_done")
    log.recording = True
    try:
        with torch.no_grad():
            if first and device == "cuda":
                out, times = kernels.profile_cuda(lambda: model(*args))
                facts["cuda_kernels"] = [name for name, _ in times or []]
                facts["cuda_kernel_times"] = [[name, us] for name, us in times or []]
                facts["profiler_available"] = times is not None
            else:
                out = model(*args)
            if device == "cuda":
                torch.cuda.synchronize()
    except BaseException as exc:
        raise Stop("run", f"case {case.name}: " + _error_text(exc)) from None
    finally:
        log.recording = False
    facts["kernel_names_done"] = True
    fact: dict[str, Any] = {"flag_changes": guard.restore_flags(flags)}
    fact["mutated_inputs"] = [
        i for i, (x, o) in enumerate(zip(args, originals)) if isinstance(x, torch.Tensor) and not _same(x, o)
    ]
    out = C.single_output(out)
    if not isinstance(out, torch.Tensor):
        fact["output_type"] = type(out).__name__
        return fact
    fact["output_type"] = "Tensor"
    named = {f"input {i}": x for i, x in enumerate(args) if isinstance(x, torch.Tensor)}
    named.update(_held_tensors(model))  # after the call: what the module holds now
    previous = facts.get("_previous_output")
    if previous is not None:  # still alive, so the allocator cannot have reused its memory
        named["the previous call's output (a reused output buffer)"] = previous
    fact["aliases"] = _aliases(out, named)
    facts["_previous_output"] = out
    torch.save({"output": out.detach().cpu().clone()}, workdir / f"out_{case.name}.pt")
    if case.group == C.CORRECTNESS:
        facts.setdefault("_untimed", {})[case.name] = out.detach().clone()
    return fact


def _save_timed_fresh(fresh: F.FreshInputs, workdir: Path, timing_facts: dict[str, Any]) -> None:
    out = fresh.final_output
    out = C.single_output(out)
    timing_facts["fresh_output_type"] = type(out).__name__ if not isinstance(out, torch.Tensor) else "Tensor"
    if isinstance(out, torch.Tensor):
        torch.save({"output": out.detach().cpu()}, workdir / "out_timed_fresh.pt")


def _time(model, sets, untimed, device, spec, fresh=None) -> dict[str, Any]:
    """Time the solution over rotating input sets; re-check each set's last timed output
    against the untimed output of the same inputs (which the parent checked)."""
    def call(args):
        return model(*args)

    with torch.no_grad():
        if device == "cuda":
            plan = timing.TimingPlan(max_seconds=float(spec.get("timing_seconds", 20.0)), profile_reps=10)
            stats, last = timing.time_cuda(call, sets, plan, fresh=fresh)
            if timing.CLOCK_CHANGED in stats.flags:
                # The clock moved while timing (seen on an H200: 1668 -> 1957 MHz), so part of
                # the samples ran slower; the GPU is warm now, so time once more and keep that.
                first = stats
                stats, last = timing.time_cuda(call, sets, plan, fresh=fresh)
                stats.details["clock_retry"] = {
                    "first_median_ms": first.median_ms,
                    "first_sm_clock_mhz": [first.details.get("sm_clock_mhz_before"),
                                           first.details.get("sm_clock_mhz_after")],
                }
        else:
            sets = sets[:2]  # the interpreter is slow; two sets still rotate
            stats, last = timing.time_cpu(call, sets, fresh=fresh)
    mismatched = []
    for k, (timed, ref) in enumerate(zip(last, untimed)):
        timed = C.single_output(timed)
        ok = (
            isinstance(timed, torch.Tensor) and timed.shape == ref.shape and timed.dtype == ref.dtype
            and bool(torch.isclose(timed.double(), ref.double(), rtol=1e-2, atol=1e-2, equal_nan=True).all())
        )
        if not ok:
            mismatched.append(k)
    return {"stats": stats.to_dict(), "recheck_mismatched_sets": mismatched, "sets": len(sets)}
