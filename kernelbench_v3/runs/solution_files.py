"""The runs dataset's solution files: their `<model>_<GPU>_<problem>.py.txt` names, both ways, and
attaching each run's solution source (published file or evaluator record path) to the runs."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from ..vocab import SPLIT_OF_RUNS_GPU


def problem_file_name(problem: Any) -> str:
    """The bare file name of a `problem` cell ("level1/40_LayerNorm" -> "40_LayerNorm.py")."""
    name = str(problem).strip().replace("\\", "/").rsplit("/", 1)[-1]
    return name if name.endswith(".py") else f"{name}.py"


def solution_file_name(model: str, gpu: str, problem: str) -> str:
    """The published name of a winning solution: `<model>_<gpu>_<problem>.py.txt`."""
    return f"{model}_{gpu}_{problem_file_name(problem)}.txt"


def parse_solution_name(name: str, known_problems: Iterable[str] | None = None) -> tuple[str, str, str]:
    """`"<model>_<gpu>_<problem>.py.txt"` -> (model, GPU, problem file).

    Model names may contain underscores (and problem names always do), so the name is split at
    a `_<GPU>_` separator for a known GPU; when several separators fit, the one that leaves a
    known problem file wins, else the last one. Raises ValueError when none fits.
    """
    base = Path(name).name
    if not base.endswith(".py.txt"):
        raise ValueError(f"solution file {name!r} does not end with .py.txt")
    stem = base[: -len(".txt")]
    known = set(known_problems or ())
    splits = []
    for gpu in SPLIT_OF_RUNS_GPU:
        for match in re.finditer(re.escape(f"_{gpu}_"), stem):
            model, problem = stem[: match.start()], stem[match.end() :]
            if model and problem:
                splits.append((model, gpu, problem))
    if not splits:
        raise ValueError(
            f"solution file {name!r} has no _<GPU>_ separator for a known GPU ({', '.join(SPLIT_OF_RUNS_GPU)})"
        )
    fitting = [s for s in splits if s[2] in known]
    return (fitting or splits)[-1]


def attach_solutions(runs: pd.DataFrame, folder: Path | str | None) -> pd.DataFrame:
    """Add `solution_file` and `solution_source` (None where no file exists).

    Published rows are looked up as `<folder>/<model>_<gpu>_<problem>.py.txt`; evaluator
    records use their own `solution_path`. Solution files matching no row are listed in
    `attrs["orphan_solutions"]` as (file, model, gpu, problem).
    """
    out = runs.copy()
    folder = Path(folder) if folder is not None else None
    files, sources = [], []
    for row in out.itertuples(index=False):
        path = None
        record_path = getattr(row, "solution_path", None)
        if isinstance(record_path, str) and record_path:
            path = Path(record_path)
        elif folder is not None:
            path = folder / solution_file_name(row.model, row.gpu, row.problem)
        if path is not None and path.is_file():
            files.append(path.name)
            sources.append(path.read_text(encoding="utf-8", errors="replace"))
        else:
            files.append(None)
            sources.append(None)
    out["solution_file"] = pd.Series(files, dtype=object)
    out["solution_source"] = pd.Series(sources, dtype=object)
    orphans = []
    if folder is not None and folder.is_dir():
        used = {f for f in files if f}
        known = set(out["problem_file"]) if "problem_file" in out.columns else set()
        for path in sorted(folder.glob("*.py.txt")):
            if path.name in used:
                continue
            try:
                orphans.append((path.name, *parse_solution_name(path.name, known)))
            except ValueError:
                orphans.append((path.name, None, None, None))
    out.attrs["orphan_solutions"] = orphans
    return out
