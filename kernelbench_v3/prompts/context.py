"""What a prompt states: the facts a template is rendered with, gathered in one plain dict.

Owns the mapping from a problem and a GPU split to prompt facts: the reference source and its
interface, its input and output shapes and dtypes (traced on meta tensors by
`kernelbench_v3.catalog.specs`, so nothing is allocated or computed), the GPU's numbers (from
`kernelbench_v3.hardware.gpus`), the problem's roofline (from `kernelbench_v3.hardware.roofline`, when it has
one), the toolchains allowed for that GPU and category, and the evaluator's correctness settings
(tolerance, seeds). Templates only lay these out; the wording of the rules lives in the template
files, so a user template can reword them without touching code.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from .. import syntax
from ..catalog.problem import Problem
from ..evaluate import DEFAULT_SEEDS, MAIN_WORK_SHARE, PRECISION_MARGIN, V3_TOLERANCE
from ..vocab import SPLITS

# The evaluator's default ("v3") correctness test is torch.allclose with these (see
# evaluate.checks); its "published" and "strict" modes are stricter.
DEFAULT_ATOL, DEFAULT_RTOL = V3_TOLERANCE


@dataclass(frozen=True)
class Toolchain:
    """One way a solution may build its kernels, and how it is used from `solution.py`."""

    key: str
    name: str
    how: str


TOOLCHAINS: dict[str, Toolchain] = {
    "cuda": Toolchain(
        "cuda",
        "CUDA C++",
        "compiled at import time with `torch.utils.cpp_extension.load_inline` (source strings "
        "in solution.py; nvcc builds it for this GPU's compute capability)",
    ),
    "triton": Toolchain(
        "triton",
        "Triton",
        "`@triton.jit` kernels defined at module level in solution.py and launched from `forward`",
    ),
    "cutlass": Toolchain(
        "cutlass",
        "CUTLASS / CuTe",
        "CUTLASS or CuTe C++ templates built with `torch.utils.cpp_extension.load_inline`, or "
        "the CuTe Python DSL (`cutlass.cute`)",
    ),
    "cutile": Toolchain(
        "cutile",
        "cuTile",
        "NVIDIA's tile DSL (`import cuda.tile as ct`): kernels under `@ct.kernel`, launched with "
        "`ct.launch(torch.cuda.current_stream(), grid, kernel, args)`",
    ),
}


def toolchains_for(split: str, category: str) -> list[Toolchain]:
    """CUDA and Triton everywhere; CUTLASS/CuTe for tile_specialized on H100 and B200; cuTile
    (listed first, since the problem is posed for it) for cutile on B200."""
    chosen = ["cuda", "triton"]
    if category == "tile_specialized" and split in ("h100", "b200"):
        chosen.append("cutlass")
    if category == "cutile" and split == "b200":
        chosen.insert(0, "cutile")
    return [TOOLCHAINS[key] for key in chosen]


def constructor_signature(source: str) -> str:
    """`Model(in_features, out_features)`: the reference's `__init__` arguments, without self."""
    tree = syntax.parse(source)
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name == "Model":
            for item in stmt.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    args = item.args
                    args.args = args.args[1:]  # drop self
                    return f"Model({ast.unparse(args)})"
            return "Model()"
    raise ValueError("the reference source defines no `class Model`")


def fence_for(*texts: str) -> str:
    """A backtick fence longer than any backtick run inside the texts (at least three)."""
    longest = max((len(run) for text in texts for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def gpu_facts(split: str, precisions: tuple[str, ...]) -> dict[str, Any]:
    """The GPU numbers a prompt states for `split`; peak rates for `precisions` only (None where
    the GPU has no path for one)."""
    from ..hardware.gpus import get_gpu

    if split not in SPLITS:
        raise ValueError(f"unknown GPU split {split!r}; choose one of {', '.join(SPLITS)}")
    spec = get_gpu(split)
    major, minor = spec.compute_capability
    return {
        "split": split,
        "name": spec.name,
        "sku": spec.sku,
        "architecture": spec.architecture,
        "compute_capability": f"{major}.{minor}",
        "sm": f"sm_{major}{minor}",
        "sm_count": spec.sm_count,
        "memory_gb": spec.memory_gb,
        "bandwidth_gbs": spec.memory_bandwidth_gbs,
        "l2_mb": spec.l2_cache_mb,
        "peaks": [{"precision": p, "tflops": spec.peak_tflops.get(p)} for p in precisions],
    }


def relevant_precisions(problem: Problem, specs: dict[str, Any] | None) -> tuple[str, ...]:
    """fp32 (plain and TF32), the problem's supported precisions, and the dtypes of its inputs."""
    from ..vocab import PRECISIONS

    wanted = {"fp32", "tf32", *problem.supported_precisions}
    if specs is not None:
        wanted.update(specs["precisions"])
    return tuple(p for p in PRECISIONS if p in wanted)


@lru_cache(maxsize=256)
def _specs(path: Path, sha256: str) -> dict[str, Any] | None:
    """Input and output shapes/dtypes at default sizes, traced on meta tensors (nothing is
    allocated); None when the problem cannot be traced that way."""
    import torch

    from ..catalog.specs import specs_of_file
    from ..hardware.roofline import precision_of

    try:
        specs = specs_of_file(path, sha256)  # shared with the dataset build's tracing
    except Exception:  # noqa: BLE001 - e.g. an import only a GPU machine has; shapes are optional
        return None
    tensors = [s for s in specs.input_specs or [] if s["kind"] == "tensor"]
    precisions = []
    for spec in tensors:
        try:
            precisions.append(precision_of(getattr(torch, spec["dtype"])))
        except (AttributeError, ValueError):
            pass
    return {
        "inputs": [_spec_text(s) for s in specs.input_specs or []],
        "output": None if specs.output_spec is None else _spec_text(specs.output_spec),
        "precision": precisions[0] if precisions else None,  # the first tensor's, as published
        "precisions": precisions,
    }


def _spec_text(spec: dict[str, Any]) -> str:
    if spec.get("kind", "tensor") == "tensor":
        return f"{spec['dtype']} tensor of shape ({', '.join(map(str, spec['shape']))}{',' if len(spec['shape']) == 1 else ''})"
    return f"{spec['kind']} {spec['value']}"


def roofline_facts(problem: Problem, split: str, precision: str | None) -> dict[str, Any] | None:
    """FLOPs, minimal bytes and speed-of-light time at default sizes, when the table has the
    problem and the GPU has a peak for `precision`."""
    from ..hardware.roofline import DEFAULT_ROOFLINE, speed_of_light_ms

    entry = DEFAULT_ROOFLINE.get(problem.problem_id)
    if entry is None or precision is None:
        return None
    flops, min_bytes = entry
    try:
        sol_ms = speed_of_light_ms(flops, min_bytes, split, precision)
    except KeyError:  # e.g. fp8 inputs on an RTX 3090: no peak to bound by
        return None
    return {
        "flops": flops,
        "gflop": flops / 1e9,
        "min_bytes": min_bytes,
        "min_mb": min_bytes / 1e6,
        "precision": precision,
        "speed_of_light_ms": sol_ms,
    }


def one_shot_example(folder: Path) -> dict[str, str]:
    """The bundled one-shot example: a small reference and a correct Triton solution for it."""
    reference = (folder / "one_shot_reference.py").read_text(encoding="utf-8")
    solution = (folder / "one_shot_solution.py").read_text(encoding="utf-8")
    return {
        "reference": reference.rstrip("\n"),
        "solution": solution.rstrip("\n"),
        "fence": fence_for(reference, solution),
    }


def build_context(problem: Problem, split: str, one_shot: dict[str, str] | None = None) -> dict[str, Any]:
    """Everything a template may use, as plain values (see templates/default.j2 for a reader)."""
    if split not in problem.gpus:
        raise ValueError(
            f"problem {problem.problem_id} is not in the {split!r} split "
            f"(its splits: {', '.join(problem.gpus) or 'none'})"
        )
    source = problem.source.rstrip("\n")
    try:
        constructor = constructor_signature(source)
    except (SyntaxError, ValueError) as exc:
        raise ValueError(f"{problem.path}: cannot read the reference's constructor: {exc}") from None
    specs = _specs(problem.path, problem.sha256)
    return {
        "problem": {
            "problem_id": problem.problem_id,
            "file_name": problem.file_name,
            "name": problem.name,
            "category": problem.category,
            "level": problem.level,
            "op_type": problem.op_type,
            "supported_precisions": list(problem.supported_precisions),
            "sizes": problem.sizes,
            "constructor": constructor,
            "source": source,
        },
        "specs": specs,
        "fence": fence_for(source),
        "gpu": gpu_facts(split, relevant_precisions(problem, specs)),
        "roofline": roofline_facts(problem, split, specs["precision"] if specs else None),
        "toolchains": toolchains_for(split, problem.category),
        "tolerance": {"atol": DEFAULT_ATOL, "rtol": DEFAULT_RTOL},
        "seeds": len(DEFAULT_SEEDS),
        "precision_margin": PRECISION_MARGIN,
        "main_work_share": f"{MAIN_WORK_SHARE:.0%}",
        "one_shot": one_shot,
    }
