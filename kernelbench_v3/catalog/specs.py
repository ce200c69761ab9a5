"""Input and output specs of a problem: shapes and dtypes, computed without allocating tensors.

Owns `problem_specs(module)` (and `specs_of_file`, its cached form for a problem file): it calls `get_init_inputs()`, `get_inputs()`, builds the `Model`
and runs its forward under `torch.device("meta")`, so a 2 GB input costs nothing. A forward that
needs real data (`.item()`, `torch.nonzero`, an op without a meta kernel) cannot be traced
that way; its output spec is then None and `Specs.reason` says why, instead of a guess.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

import torch


@dataclass(frozen=True)
class Specs:
    """What a problem takes and returns at its default sizes.

    `init_inputs` is JSON text of `get_init_inputs()` (tuples become lists, tensors become spec
    objects); `input_specs` has one dict per element of `get_inputs()`; `output_spec` describes
    the single tensor the forward returns. None means it could not be computed; `reason` says why.
    `model` and `inputs` are the meta-device objects, for FLOP counting.
    """

    init_inputs: str | None
    input_specs: list[dict[str, Any]] | None
    output_spec: dict[str, Any] | None
    reason: str | None
    model: torch.nn.Module | None = None
    inputs: list[Any] | None = None


class SpecsError(ValueError):
    """A problem whose inputs or model cannot even be built on the meta device (a defect of
    the file, unlike a forward that needs real data); the message names the failing call."""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def value_spec(value: Any) -> dict[str, Any]:
    """{kind, shape, dtype, value}: shape/dtype for tensors, JSON `value` for everything else."""
    if isinstance(value, torch.Tensor):
        return {"kind": "tensor", "shape": list(value.shape), "dtype": dtype_name(value.dtype), "value": None}
    return {"kind": type(value).__name__, "shape": None, "dtype": None, "value": json.dumps(_jsonable(value))}


def tensor_spec(value: torch.Tensor) -> dict[str, Any]:
    return {"shape": list(value.shape), "dtype": dtype_name(value.dtype)}


def _jsonable(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return {"tensor": tensor_spec(value)}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # JSON has no inf/nan
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.dtype):
        return dtype_name(value)
    return repr(value)


def _call(what: str, fn: Any) -> Any:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - reported with the call that failed
        raise SpecsError(f"{what} raised on the meta device: {describe_error(exc)}") from exc


def _as_list(what: str, value: Any) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise SpecsError(f"{what} must return a list, got {type(value).__name__}")
    return list(value)


def describe_error(exc: BaseException) -> str:
    """`Type: first sentence of the message` (torch's messages run on for paragraphs)."""
    first_line = (str(exc).strip().splitlines() or [""])[0]
    sentence = first_line.split(". ", 1)[0].rstrip(".")
    return f"{type(exc).__name__}: {sentence[:200]}"


def problem_specs(module: ModuleType) -> Specs:
    """Specs of an imported problem module (see the module docstring).

    Failures of `get_init_inputs()`, `get_inputs()` or the constructor are defects of the
    problem file and raise SpecsError; only the forward may fail (data-dependent ops).
    """
    # Meta tensors make every factory call in the file (randn, randint, zeros, Parameter
    # init) allocate nothing. Model constructors that seed the CPU RNG save and restore it.
    with torch.device("meta"):
        init_args = _as_list("get_init_inputs()", _call("get_init_inputs()", module.get_init_inputs))
        inputs = _as_list("get_inputs()", _call("get_inputs()", module.get_inputs))
        model = _call("Model(*get_init_inputs())", lambda: module.Model(*init_args).eval())
    init_inputs = json.dumps(_jsonable(init_args))
    input_specs = [value_spec(v) for v in inputs]
    try:
        with torch.device("meta"), torch.no_grad():
            output = model(*inputs)
    except Exception as exc:  # noqa: BLE001 - any failure means "not traceable on meta"
        reason = (
            "output_spec is null: the forward cannot run on meta tensors (it needs real data "
            f"or an op without a meta kernel): {describe_error(exc)}"
        )
        return Specs(init_inputs, input_specs, None, reason, model, inputs)
    if not isinstance(output, torch.Tensor):
        reason = f"output_spec is null: the forward returns {type(output).__name__}, not a single tensor"
        return Specs(init_inputs, input_specs, None, reason, model, inputs)
    return Specs(init_inputs, input_specs, tensor_spec(output), None, model, inputs)


@lru_cache(maxsize=512)
def specs_of_file(path: Path, sha256: str) -> Specs:
    """`problem_specs` of the problem file at `path`, computed once per (path, content hash):
    the dataset build and the prompt renderer both need them, and tracing costs ~30 ms each.
    Raises SpecsError when the file cannot be imported or its inputs/model cannot be built."""
    from .materialize import load_module

    try:
        module = load_module(Path(path))
    except Exception as exc:  # noqa: BLE001 - any import failure is a defect of the file
        raise SpecsError(f"importing it raised {describe_error(exc)}") from exc
    return problem_specs(module)
