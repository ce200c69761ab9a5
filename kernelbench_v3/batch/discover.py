"""Finding the solutions of a batch: which files are solutions of which problems, for which
model and sample, in either folder layout.

Three solution layouts are understood:

- like `problems/`: `<SOLUTIONS>/level1/40_LayerNorm.py` solves `level1/40_LayerNorm`; the model
  name is `--model`, else the folder's name;
- the samples layout `kbv3 generate` writes (`runs.sample_files`): a `samples.json` manifest
  naming the model, the split and every sample, `<category>/<problem>/sample_<k>.py` for each one
  with code; a sample without code is recorded as failed (check `response`), not evaluated;
- like the runs dataset's `solutions/`: `<model>_<GPU>_<problem file stem>.py.txt`, e.g.
  `claude-opus-4_H100_40_LayerNorm.py.txt`, parsed by the runs dataset's own
  `runs.solution_files.parse_solution_name` (model names may contain `_`: the name is split at the `_<GPU>_`
  whose remainder is a catalog problem file); files for other GPUs than the split's are
  skipped.

`importable_path` gives a runs-dataset `*.py.txt` solution a `.py` copy the evaluator can import.
This module and everything it imports stay free of `datasets` (the GPU hosts lack it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..catalog.problem import Problem, discover
from ..vocab import SPLITS, runs_gpu_name
from .queue import BatchItem

RUNS_SUFFIX = ".py.txt"


class BatchError(ValueError):
    """A batch that cannot start: bad solutions folder, foreign journal, busy journal."""


class UnknownSolutionError(BatchError):
    """Solution files that name no known problem (a typo): a usage error, as in `kbv3 eval`."""


def split_gpu(split: str) -> str:
    """The runs-dataset GPU name of a split: `h100` -> `H100`."""
    if split not in SPLITS:
        raise BatchError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    return runs_gpu_name(split)


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


@dataclass
class SolutionSet:
    items: list[BatchItem]
    skipped: list[Skipped] = field(default_factory=list)


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ----------------------------------------------------------------------------- discovery


def discover_solutions(
    folder: Path | str,
    split: str,
    problems_root: Path | str | None = None,
    model: str | None = None,
) -> SolutionSet:
    """Every solution under `folder` (either layout) for the problems of `split`.

    Files for problems outside the split, or for another GPU, are returned as `skipped` with a
    reason. A file that names no known problem at all is an error (listing every such file),
    because a typo must not silently shrink a batch.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise BatchError(f"solutions folder {folder} does not exist")
    gpu = split_gpu(split)
    catalog = discover(problems_root)
    from ..runs.sample_files import MANIFEST  # lazily: runs imports pandas

    if (folder / MANIFEST).is_file():
        return discover_samples(folder, split, catalog, model)
    in_split = {p.problem_id for p in catalog if split in p.gpus}
    order = {p.problem_id: i for i, p in enumerate(catalog)}
    by_file: dict[str, list[Problem]] = {}
    for p in catalog:
        by_file.setdefault(p.file_name, []).append(p)

    items: list[BatchItem] = []
    skipped: list[Skipped] = []
    errors: list[str] = []
    layout_model = model or folder.resolve().name

    for path in sorted(folder.glob(f"*{RUNS_SUFFIX}")):
        parsed = parse_runs_name(path.name, by_file, in_split)
        if isinstance(parsed, str):
            errors.append(f"{path}: {parsed}")
            continue
        run_model, run_gpu, problem_id = parsed
        if run_gpu != gpu:
            skipped.append(Skipped(str(path), f"solution for {run_gpu}, batch is for {gpu}"))
        elif problem_id not in in_split:
            skipped.append(Skipped(str(path), f"{problem_id} is not in split {split}"))
        else:
            items.append(BatchItem(run_model, gpu, problem_id, str(path), sha256_file(path)))

    for path in sorted(folder.glob("*/*.py")):
        if path.name.startswith("_"):
            continue
        problem_id = f"{path.parent.name}/{path.stem}"
        if problem_id not in order:
            errors.append(f"{path}: no problem {problem_id!r} in the catalog{_did_you_mean(problem_id, order)}")
        elif problem_id not in in_split:
            skipped.append(Skipped(str(path), f"{problem_id} is not in split {split}"))
        else:
            items.append(BatchItem(layout_model, gpu, problem_id, str(path), sha256_file(path)))

    if len(errors) == 1:
        raise UnknownSolutionError(f"solution file {errors[0]}")
    if errors:
        raise UnknownSolutionError(
            f"{len(errors)} solution file(s) under {folder} name no known problem:\n"
            + "\n".join(f"  - {e}" for e in errors)
        )
    if not items and not skipped:
        raise BatchError(
            f"no solutions under {folder}: expected <category>/<problem>.py files "
            f"(like problems/) or <model>_<GPU>_<problem>{RUNS_SUFFIX} files (like the runs dataset)"
        )
    items.sort(key=lambda it: (order[it.problem_id], it.model, it.solution_path))
    return SolutionSet(items=items, skipped=skipped)


def discover_samples(folder: Path, split: str, catalog: list[Problem], model: str | None = None) -> SolutionSet:
    """The samples of a `samples.json` folder, sorted by problem (catalog order), then sample."""
    from ..runs.sample_files import SampleManifestError, read_manifest

    try:
        manifest = read_manifest(folder)
    except SampleManifestError as exc:
        raise BatchError(str(exc)) from None
    if manifest.split != split:
        raise BatchError(f"{folder}: the samples were generated for split {manifest.split}, the batch is for {split}")
    gpu = split_gpu(split)
    order = {p.problem_id: i for i, p in enumerate(catalog)}
    in_split = {p.problem_id for p in catalog if split in p.gpus}
    unknown = [e.problem_id for e in manifest.entries if e.problem_id not in order]
    if unknown:
        first = unknown[0]
        raise UnknownSolutionError(
            f"{folder}: {len(unknown)} sample(s) name no known problem, e.g. {first!r}{_did_you_mean(first, order)}"
        )
    name = model or manifest.model
    items, skipped = [], []
    for e in manifest.entries:
        path = folder / e.file if e.file is not None else None
        if e.problem_id not in in_split:
            skipped.append(Skipped(str(path or folder), f"{e.problem_id} is not in split {split}"))
        elif path is None:
            items.append(BatchItem(name, gpu, e.problem_id, "", "", sample=e.sample, missing=e.reason))
        else:
            items.append(BatchItem(name, gpu, e.problem_id, str(path), sha256_file(path), sample=e.sample))
    if not items and not skipped:
        raise BatchError(f"no samples listed in {folder}/samples.json")
    items.sort(key=lambda it: (order[it.problem_id], it.sample))
    return SolutionSet(items=items, skipped=skipped)


def parse_runs_name(name: str, by_file: dict[str, list[Problem]], in_split: set[str]) -> tuple[str, str, str] | str:
    """`<model>_<GPU>_<problem file>.txt` -> (model, GPU, problem_id), or why it does not parse.

    The name is split by the runs dataset's own parser (`runs.solution_files.parse_solution_name`: at a
    `_<GPU>_` separator whose remainder is a known problem file). A problem file name found in
    several folders resolves to the one in the split.
    """
    from ..runs.solution_files import parse_solution_name  # lazily: runs imports pandas

    try:
        model, gpu, file_name = parse_solution_name(name, by_file)
    except ValueError as exc:
        return str(exc)
    candidates = by_file.get(file_name, [])
    if not candidates:
        stems = {f.removesuffix(".py"): f for f in by_file}
        near = _did_you_mean(file_name.removesuffix(".py"), stems)
        return f"names no known problem file ({file_name!r} is not in the catalog){near}"
    preferred = [p for p in candidates if p.problem_id in in_split] or candidates
    if len(preferred) > 1:
        return f"problem file {file_name} is ambiguous ({', '.join(p.problem_id for p in preferred)})"
    return model, gpu, preferred[0].problem_id


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    from ..catalog.problem import suggest_ids

    near = suggest_ids(name, known)
    return f"; did you mean {' or '.join(near)}?" if near else ""


# ----------------------------------------------------------------------------- selection


def select_problems(
    found: SolutionSet,
    split: str,
    problems_root: Path | str | None = None,
    *,
    only: Iterable[str] | None = None,
    limit: int | None = None,
) -> tuple[SolutionSet, int]:
    """(the solutions of `only`'s problems, of the first `limit` problems in catalog order, how
    many solutions were left out). Every sample of a chosen problem is kept. An id of `only`
    outside the split, or with no solution under the folder, is an UnknownSolutionError (a
    usage error naming it), never a batch that silently did less."""
    items = found.items
    if only is not None:
        wanted = list(dict.fromkeys(only))
        in_split = [p.problem_id for p in discover(problems_root) if split in p.gpus]
        foreign = [i for i in wanted if i not in in_split]
        if foreign:
            hint = _did_you_mean(foreign[0], in_split)
            raise UnknownSolutionError(f"argument --only: {', '.join(foreign)} not in the {split} split{hint}")
        have = {it.problem_id for it in items}
        missing = [i for i in wanted if i not in have]
        if missing:
            raise UnknownSolutionError(f"argument --only: no solution of {', '.join(missing)} in this folder")
        items = [it for it in items if it.problem_id in set(wanted)]
    if limit is not None:
        first = list(dict.fromkeys(it.problem_id for it in items))[:limit]
        items = [it for it in items if it.problem_id in set(first)]
    return SolutionSet(items=items, skipped=found.skipped), len(found.items) - len(items)


def importable_path(path: Path) -> Path:
    """A `.py` path with the solution's content: the file itself, or for a runs-dataset
    `*.py.txt` a content-addressed `.py` copy (Python imports only `.py` files)."""
    if path.suffix == ".py":
        return path
    from ..catalog.materialize import write_module_file

    stem = path.name.removesuffix(".txt").removesuffix(".py")
    return write_module_file(path.read_text(encoding="utf-8"), stem=stem)
