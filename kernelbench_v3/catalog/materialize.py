"""Materializing problems: source text or a path -> a module in a real file -> model and inputs.

Owns size overrides and seeding. A module is always imported from a real file, never `exec`'d
from a string, because Triton reads kernel source through `inspect` and refuses code without a
file. Size overrides rewrite the literal assignments of the problem's size variables and
re-execute the module, so sizes derived at module level (`M = batch_size * seq_len`) follow.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from .. import syntax
from ..paths import write_atomically
from .problem import Problem, SizeValue, size_variables_of


class MaterializeError(ValueError):
    """A problem or solution that cannot be turned into a running module; names its origin."""


class RowIntegrityError(MaterializeError):
    """A dataset row whose `code` does not hash to its `sha256`: it was altered or corrupted."""


def verify_row(row: Mapping[str, Any], origin: str = "row") -> None:
    """Raise RowIntegrityError unless sha256(row["code"]) == row["sha256"]."""
    for key in ("problem_id", "code", "sha256"):
        if not isinstance(row.get(key), str):
            raise RowIntegrityError(f"{origin}: field {key!r} is missing or not a string")
    actual = hashlib.sha256(row["code"].encode("utf-8")).hexdigest()
    if actual != row["sha256"]:
        raise RowIntegrityError(
            f"{origin}: problem {row['problem_id']}: its code does not match its sha256 "
            f"(recorded {row['sha256']}, code hashes to {actual}); refusing to run altered code"
        )


def module_dir() -> Path:
    """Where materialized module files are written (`$KBV3_MODULE_DIR` or a temp folder)."""
    path = Path(os.environ.get("KBV3_MODULE_DIR") or Path(tempfile.gettempdir()) / "kbv3-modules")
    path.mkdir(parents=True, exist_ok=True)
    return path


def parse_sizes(text: str | None) -> dict[str, SizeValue]:
    """`"batch_size=4,dim=64"` -> {"batch_size": 4, "dim": 64} (ints, floats, True/False)."""
    sizes: dict[str, SizeValue] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"size override {item!r} is not NAME=VALUE")
        try:
            value = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            raise ValueError(f"size override {item!r}: {raw!r} is not a number or True/False") from None
        if type(value) not in (int, float, bool):
            raise ValueError(f"size override {item!r}: {raw!r} is not a number or True/False")
        sizes[name.strip()] = value
    return sizes


def rewrite_sizes(source: str, sizes: Mapping[str, SizeValue], origin: str = "<source>") -> str:
    """The source with the literal assignments of the named size variables replaced."""
    if not sizes:
        return source
    try:
        tree = syntax.parse(source, filename=origin)
    except SyntaxError as exc:
        raise MaterializeError(f"{origin}: syntax error at line {exc.lineno}: {exc.msg}") from None
    known = size_variables_of(tree)
    unknown = sorted(set(sizes) - set(known))
    if unknown:
        raise MaterializeError(
            f"{origin}: cannot override {unknown}: not size variables of this problem (size variables: {sorted(known)})"
        )
    for stmt in tree.body:
        if not isinstance(stmt, ast.Assign):
            continue
        for target in stmt.targets:
            if isinstance(target, ast.Name) and target.id in sizes:
                stmt.value = ast.Constant(sizes[target.id])
            elif isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple):
                for i, elt in enumerate(target.elts):
                    if isinstance(elt, ast.Name) and elt.id in sizes:
                        stmt.value.elts[i] = ast.Constant(sizes[elt.id])
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def write_module_file(source: str, stem: str = "module") -> Path:
    """Write `source` to a content-addressed file (atomically) and return its path."""
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]
    safe = "".join(c if c.isalnum() or c == "_" else "_" for c in stem) or "module"
    path = module_dir() / f"{safe}_{digest}.py"
    # An existing file is used only when its bytes are exactly `source`: anything else (a solution
    # that rewrote it, a torn write) is replaced, never imported.
    if not path.exists() or path.read_bytes() != source.encode("utf-8"):
        write_atomically(path, source)
    return path


def import_file(path: Path | str, module_name: str | None = None) -> ModuleType:
    """Import a Python file as a fresh module registered in sys.modules under a unique name."""
    path = Path(path)
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    name = module_name or f"kbv3_mod_{''.join(c if c.isalnum() else '_' for c in path.stem)}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise MaterializeError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        sys.modules.pop(name, None)
        raise
    return module


def load_module(
    problem: Problem | Path | str,
    sizes: Mapping[str, SizeValue] | None = None,
    *,
    stem: str | None = None,
) -> ModuleType:
    """Import a problem (a Problem, a path, or source text) with optional size overrides.

    A path is imported in place when there are no overrides, so tracebacks point at the real
    file. Source text and rewritten sources are written to a content-addressed file first.
    """
    if isinstance(problem, Problem):
        path: Path | None = problem.path
        source = None
        stem = stem or problem.name
    elif isinstance(problem, Path):
        path, source = problem, None
        stem = stem or problem.stem
    else:
        path, source = None, problem
        stem = stem or "module"
    if path is not None and not sizes:
        return import_file(path)
    if source is None:
        assert path is not None
        source = path.read_text(encoding="utf-8")
    origin = str(path) if path is not None else f"<source of {stem}>"
    rewritten = rewrite_sizes(source, sizes or {}, origin=origin)
    return import_file(write_module_file(rewritten, stem=stem))


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)  # also seeds every CUDA device's generator


def to_device(value: Any, device: torch.device | str) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    return value


def make_model(module: ModuleType, device: torch.device | str = "cpu", seed: int = 0) -> torch.nn.Module:
    """`Model(*get_init_inputs())` built under `seed`, moved to `device`, in eval mode."""
    seed_everything(seed)
    model = module.Model(*module.get_init_inputs())
    return model.to(device).eval()


def make_inputs(module: ModuleType, device: torch.device | str = "cpu", seed: int = 0) -> list[Any]:
    """`get_inputs()` drawn under `seed` (on the CPU generator, as published), moved to `device`."""
    seed_everything(seed)
    return list(to_device(module.get_inputs(), device))


def draw_inputs(module: ModuleType, device: torch.device | str, seed: int | None = None) -> list[Any]:
    """`get_inputs()` under `seed` (or going on from the generators' state) with its factory calls
    made on `device` directly (they follow the default device), so a set of inputs costs what
    generating it there costs: on a GPU, milliseconds where the CPU generator takes about a second
    per 268 MB. Other values than `make_inputs` draws (another generator), as random."""
    if seed is not None:
        seed_everything(seed)
    with torch.device(device):
        inputs = list(module.get_inputs())
    return list(to_device(inputs, device))


@dataclass
class Instance:
    """A live problem: its module, the reference model and one set of inputs."""

    module: ModuleType
    model: torch.nn.Module
    inputs: list[Any]

    def run(self) -> Any:
        with torch.no_grad():
            return self.model(*self.inputs)


def instantiate(
    problem: Problem | Path | str,
    device: torch.device | str = "cpu",
    seed: int = 0,
    sizes: Mapping[str, SizeValue] | None = None,
) -> Instance:
    """Model and inputs of a problem on `device`: the model is built after seeding with `seed`,
    then the generator is re-seeded with `seed` before `get_inputs()`."""
    module = load_module(problem, sizes)
    model = make_model(module, device, seed)
    inputs = make_inputs(module, device, seed)
    return Instance(module=module, model=model, inputs=inputs)
