"""Per-problem facts the runs analysis needs, computed from the problem itself and cached on disk.

Owns two facts:

- `reference_precision`: the precision the published harness assigned the problem, i.e. the
  dtype of the first tensor input (float32 -> "fp32", int8 storage -> "int8", ...), read from
  input specs traced on the meta device (no memory).
- near-identity: whether returning an input unchanged would pass the harness's correctness
  check (max|ref - x| < atol + rtol * max|ref|, tolerances by reference precision) at the
  tested inputs. The check runs the reference on the CPU, at default sizes when the inputs are
  small enough (else at REDUCED_SIZES, said in `identity_sizes`), and only for problems whose
  output has the shape and dtype of some input (traced first on meta, so others cost nothing).
  LayerNorm over 4M elements of randn input is the published case: its output is the input to
  within 2e-3.

The facts of the bundled problems ship with the package (`data/problem_facts.json`, keyed by
problem id and file sha256, written by `python -m kernelbench_v3.runs.facts`), so analysis
starts at once; a problem that is not there (a user's own folder, an edited file) is computed on
the CPU, with a progress bar on stderr, and cached per file content in
`$KBV3_CACHE_DIR/problem_facts.json`.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from ..catalog.problem import Problem
from ..paths import cache_root, write_atomically

# Harness tolerances (atol, rtol) by reference precision (shared/problem-spec.md, harness context).
TOLERANCES: dict[str, tuple[float, float]] = {
    "fp32": (1e-3, 1e-3),
    "tf32": (1e-3, 1e-3),
    "fp16": (1e-2, 1e-2),
    "bf16": (1e-2, 1e-2),
    "fp8": (0.1, 0.05),
    "fp4": (0.5, 0.1),
    "int8": (1e-3, 1e-3),
}
# Problems with more input elements (summed) or more FLOPs (roofline table) than these are
# checked at REDUCED_SIZES instead of default sizes, so the check stays a few seconds on a CPU.
MAX_CHECK_ELEMENTS = 2**27
MAX_CHECK_FLOPS = 2e10
FACT_COLUMNS = [
    "problem_id",
    "reference_precision",
    "near_identity",
    "identity_max_abs",
    "identity_tolerance",
    "identity_sizes",
    "facts_note",
]
_CACHE_VERSION = 1
SHIPPED_FACTS = Path(__file__).resolve().parents[1] / "data" / "problem_facts.json"


def cache_path() -> Path:
    return cache_root() / "problem_facts.json"


def fact_key(problem: Problem) -> str:
    return f"{problem.problem_id}:{problem.sha256}"


def shipped_facts(path: Path = SHIPPED_FACTS) -> dict[str, dict[str, Any]]:
    """The facts shipped with the package ("problem_id:sha256" -> facts); empty when the file
    is missing or from another cache version (then everything is computed)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data.get("facts", {}) if data.get("version") == _CACHE_VERSION else {}


def compute_facts(
    problem: Problem, max_elements: int = MAX_CHECK_ELEMENTS, max_flops: float = MAX_CHECK_FLOPS
) -> dict[str, Any]:
    """The facts of one problem (see the module docstring); failures are noted, not raised."""
    import torch

    from ..catalog.materialize import instantiate, load_module
    from ..catalog.specs import problem_specs
    from ..hardware.roofline import DEFAULT_ROOFLINE, precision_of

    facts: dict[str, Any] = {
        "problem_id": problem.problem_id,
        "reference_precision": None,
        "near_identity": None,
        "identity_max_abs": None,
        "identity_tolerance": None,
        "identity_sizes": None,
        "facts_note": "",
    }
    try:
        specs = problem_specs(load_module(problem))
    except Exception as exc:  # noqa: BLE001 - a broken problem file is reported, not fatal here
        facts["facts_note"] = f"cannot trace inputs: {type(exc).__name__}: {exc}"[:300]
        return facts
    tensors = [s for s in specs.input_specs or [] if s["kind"] == "tensor"]
    for spec in tensors:
        try:
            facts["reference_precision"] = precision_of(getattr(torch, spec["dtype"]))
            break
        except (ValueError, AttributeError):
            continue  # int64 indices and the like carry no precision; the harness skips them too
    out = specs.output_spec
    if out is None:
        facts["facts_note"] = specs.reason or "no output spec"
        return facts
    same = [s for s in tensors if s["shape"] == out["shape"] and s["dtype"] == out["dtype"]]
    if not same:
        facts.update(near_identity=False, facts_note="no input has the output's shape and dtype")
        return facts
    if problem.cpu_unsupported:
        facts["facts_note"] = f"identity not checked: {problem.cpu_unsupported}"
        return facts
    elements = sum(math.prod(s["shape"]) for s in tensors)
    flops = DEFAULT_ROOFLINE.get(problem.problem_id, (math.inf, 0))[0]
    sizes = None if elements <= max_elements and flops <= max_flops else problem.reduced
    facts["identity_sizes"] = "default" if sizes is None else "reduced"
    atol, rtol = TOLERANCES.get(facts["reference_precision"] or "fp32", TOLERANCES["fp32"])
    try:
        instance = instantiate(problem, "cpu", seed=42, sizes=sizes)
        ref = instance.run().float()
        best = math.inf
        for x in instance.inputs:
            if isinstance(x, torch.Tensor) and x.shape == ref.shape:
                best = min(best, (ref - x.float()).abs().max().item())
        tolerance = atol + rtol * ref.abs().max().item()
    except Exception as exc:  # noqa: BLE001
        facts["facts_note"] = f"identity check failed to run: {type(exc).__name__}: {exc}"[:300]
        return facts
    if best == math.inf:
        facts.update(
            near_identity=False,
            identity_tolerance=float(tolerance),
            facts_note="no input has the output's shape at the checked sizes",
        )
        return facts
    facts.update(
        near_identity=bool(best < tolerance), identity_max_abs=float(best), identity_tolerance=float(tolerance)
    )
    return facts


def facts_table(
    problems: Iterable[Problem],
    *,
    cache: Path | None | bool = True,
    max_elements: int = MAX_CHECK_ELEMENTS,
    max_flops: float = MAX_CHECK_FLOPS,
    shipped: bool = True,
    progress: bool | None = None,
) -> pd.DataFrame:
    """Facts of every problem as a frame (one row per problem), computed once per file content.

    Looked up in the shipped table first (`shipped`, only at the default check limits), then in
    the cache; the rest is computed on the CPU (about a second each) with a progress bar on
    stderr (`progress`: None = when stderr is a terminal)."""
    from tqdm import tqdm

    problems = list(problems)
    path = cache_path() if cache is True else (Path(cache) if cache else None)
    stored: dict[str, Any] = {}
    if path is not None and path.is_file():
        try:
            data = json.loads(path.read_text())
            if data.get("version") == _CACHE_VERSION:
                stored = data.get("facts", {})
        except (OSError, ValueError):
            stored = {}  # a corrupt cache is recomputed, never trusted
    defaults = (max_elements, max_flops) == (MAX_CHECK_ELEMENTS, MAX_CHECK_FLOPS)
    known = {**(shipped_facts() if shipped and defaults else {}), **stored}
    keys = [fact_key(p) for p in problems]
    todo = [(p, k) for p, k in zip(problems, keys) if k not in known]
    if todo:
        bar = tqdm(
            todo,
            desc=f"problem facts ({len(todo)} not shipped or cached, ~1 s each)",
            unit="problem",
            file=sys.stderr,
            disable=None if progress is None else not progress,
        )
        for problem, key in bar:
            bar.set_postfix_str(problem.problem_id, refresh=False)
            stored[key] = known[key] = compute_facts(problem, max_elements, max_flops)
        bar.close()
    if path is not None and todo:
        write_atomically(path, json.dumps({"version": _CACHE_VERSION, "facts": stored}, indent=1))
    frame = pd.DataFrame([known[k] for k in keys], columns=FACT_COLUMNS)
    frame["near_identity"] = frame["near_identity"].astype("boolean")
    return frame


def write_shipped_facts(problems: Iterable[Problem], path: Path = SHIPPED_FACTS) -> int:
    """Compute the facts of `problems` afresh and write them as the shipped table (sorted keys,
    so the file only changes when a fact does). Returns the number of problems."""
    problems = list(problems)
    facts = {fact_key(p): compute_facts(p) for p in problems}
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "version": _CACHE_VERSION,
        "note": "written by `python -m kernelbench_v3.runs.facts`; keys are problem_id:sha256 of the problem file",
        "facts": dict(sorted(facts.items())),
    }
    path.write_text(json.dumps(body, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    return len(problems)


if __name__ == "__main__":  # regenerate the shipped table from the bundled problems
    from ..catalog.problem import discover

    count = write_shipped_facts(discover(sys.argv[1] if len(sys.argv) > 1 else None))
    print(f"wrote the facts of {count} problems to {SHIPPED_FACTS}")
