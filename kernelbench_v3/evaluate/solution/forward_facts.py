"""What the solution process checks and reports about the solution's forwards, outside timing.

The helpers of the worker's `setup` and `run_case` requests: the state-dict report (every
reference key present, loaded values that stick), the comparisons behind `mutated_inputs` and
`aliases` (by byte range: a view of an input is the input), what a forward may start from (its
inputs and the model's and the solution module's tensors, for `evidence.Provenance`), the
reservoir of timed-call evidence, and the description of an output the supervisor copies out of
the arena. Everything here is evidence the supervisor judges; nothing decides a verdict.
"""

from __future__ import annotations

import random
import traceback
from typing import Any

import torch

from ...catalog.specs import dtype_name
from ..evidence import Sources, byte_span
from ..protocol.channel import DTYPES, Arena, TensorRef, tensor_nbytes
from ..protocol.messages import MAX_TIMED_SAMPLES


class SolutionFailed(Exception):
    def __init__(self, stage: str, error: str):
        super().__init__(error)
        self.stage = stage


def error_text(exc: BaseException) -> str:
    tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
    return f"{type(exc).__name__}: {exc}"[:500] + "\n" + tail[-3000:]


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (a.isnan() & b.isnan())).all().item())
    return bool(torch.equal(a, b))


def aliases(out: torch.Tensor, others: dict[str, torch.Tensor]) -> list[str]:
    """Names of the tensors whose bytes the output's overlap (views included, and two views of
    one storage only where their byte ranges meet: the timing region is one storage)."""
    lo, hi = byte_span(out)
    if hi <= lo:
        return []
    found = []
    for name, t in others.items():
        if t.device != out.device:
            continue
        a, b = byte_span(t)
        if a < hi and lo < b:
            found.append(name)
    return found


def check_state_dict(model: torch.nn.Module, ref_state: dict[str, torch.Tensor]) -> dict[str, list[str]]:
    """Every reference key present with its shape; extra buffers allowed, extra parameters not
    (they could not receive the reference's values); loaded values must stick."""
    own = model.state_dict()
    report = {
        "missing": [k for k in ref_state if k not in own],
        "wrong_shape": [
            f"{k}: {tuple(own[k].shape)} vs {tuple(v.shape)}"
            for k, v in ref_state.items()
            if k in own and own[k].shape != v.shape
        ],
        "extra_parameters": [k for k, _ in model.named_parameters() if k not in ref_state],
        "not_loaded": [],
    }
    if any(report.values()):
        return report
    model.load_state_dict(ref_state, strict=False)
    after = model.state_dict()
    report["not_loaded"] = [k for k, v in ref_state.items() if not same(after[k].detach().to(v.device), v)]
    return report


def as_init_arg(value: Any) -> Any:
    return tuple(as_init_arg(v) for v in value) if isinstance(value, list) else value


def keep_sample(samples: list[dict[str, Any]], ev: dict[str, Any], index: int) -> None:
    """Keep every observed call's evidence up to MAX_TIMED_SAMPLES, then a uniform sample of them
    (reservoir): the supervisor judges each kept one as it judges a case's."""
    if len(samples) < MAX_TIMED_SAMPLES:
        samples.append(ev)
        return
    slot = random.randrange(index + 1)
    if slot < MAX_TIMED_SAMPLES:
        samples[slot] = ev


def sources(args: list[Any], model: torch.nn.Module, solution: Any) -> Sources | None:
    """What a forward may start from: its inputs, the model's parameters and buffers (through
    nn.Module's own methods: a solution may shadow them, `self.buffers = [...]`), and the tensors
    among the attributes of every submodule and its class and among the solution module's
    globals (one level into containers: a cache of workspaces). None when the model cannot be
    walked: then no provenance is traced, rather than a wrong one."""
    module = torch.nn.Module
    found: list[Any] = []
    try:
        found += [*module.parameters(model), *module.buffers(model)]
        namespaces = [vars(solution)] if solution is not None else []
        for sub in module.modules(model):
            namespaces += [vars(sub), vars(type(sub))]  # instance and class attributes
        for namespace in namespaces:
            for value in list(namespace.values()):
                if isinstance(value, torch.Tensor):
                    found.append(value)
                elif isinstance(value, dict):
                    found += [v for v in value.values() if isinstance(v, torch.Tensor)]
                elif isinstance(value, (list, tuple)):
                    found += [v for v in value if isinstance(v, torch.Tensor)]
    except Exception:  # noqa: BLE001
        return None
    return Sources(list(args), found)


def copy_args(arena: Arena, specs: list[dict[str, Any]], device: str) -> list[Any]:
    """A case's arguments, each tensor copied out of the arena into storage of its own."""
    args = []
    for spec in specs:
        if "tensor" in spec:
            args.append(arena.view(TensorRef.from_json(spec["tensor"])).to(device, copy=True))
        else:
            args.append(spec["value"])
    return args


def describe(arena: Arena, out: Any, slot: dict[str, int]) -> dict[str, Any]:
    """What the forward returned; a tensor's bytes go into the output slot when they fit."""
    if not isinstance(out, torch.Tensor):
        return {"type_name": type(out).__name__}
    info: dict[str, Any] = {"type_name": "Tensor", "shape": list(out.shape), "dtype": dtype_name(out.dtype)}
    if info["dtype"] in DTYPES and tensor_nbytes(out) <= slot["capacity"]:
        info["ref"] = arena.put(slot["offset"], out.detach().contiguous()).to_json()
    return info
