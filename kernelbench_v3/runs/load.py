"""The runs dataset: loading, validating and normalising published (or our own) evaluation runs.

Owns the schema of `Infatoshi/kernelbench-v3-runs` (`results.csv`, one row per model x GPU x
problem), the clear errors for rows that break it, key normalisation (GPU names -> split names,
problem file names -> catalog problem ids), loading the winning solution sources, and joining
runs with the problem catalog.

Inputs accepted by `load_runs(source)`:

- a `results.csv` file, or a folder holding one (its `solutions/` sub-folder is used for sources);
- Parquet or JSONL files of evaluator records (`kernelbench_v3.evaluate.record.Record`, a superset
  of the runs columns): extra columns are kept, runs-only columns they lack (`turns`, costs,
  links, ...) are filled with nulls;
- `None`: the Hub dataset (needs network; offline, pass a local path instead).

The schema itself and row validation live in `schema`, reading files and reaching the Hub in
`sources` (both re-exported here).

The `level` column is matched robustly because the published data is not consistent: it holds
1-4 for level1-4 problems but 1 for every graphics / tile_specialized / cutile problem (even
those whose own `SPECIALIZED_LEVEL` is 2), and records may write `"level2"` or a category name.
So problems are matched by file name first; a category written in `level` (`"level3"`,
`"graphics"`) must agree, a bare number only breaks ties between files of the same name.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..catalog.problem import Problem, discover
from ..vocab import GPU_TIMING_METHODS, SPLIT_OF_RUNS_GPU
from .leaderboard import split_totals
from .schema import (  # noqa: F401 - re-exported: the runs API in one place
    RECORD_MARKERS,
    RUNS_SCHEMA,
    RunsSchemaError,
    SchemaProblem,
    _is_null,
    canonical_gpu,
    parse_level,
    validate_runs,
)
from .solution_files import attach_solutions, problem_file_name
from .sources import (  # noqa: F401 - re-exported: the runs API in one place
    HUB_REPO_ID,
    RESULTS_FILE,
    SHIPPED_FIXTURE,
    SOLUTIONS_DIR,
    RunsSourceError,
    _kind_of,
    _resolve_source,
    hub_unreachable,
    import_hub,
    offline_hint,
    read_runs_table,
)


def load_runs(
    source: Path | str | pd.DataFrame | None = None,
    *,
    problems: Sequence[Problem] | Path | str | None = None,
    solutions: bool | Path | str | None = None,
    repo_id: str = HUB_REPO_ID,
    revision: str | None = None,
) -> pd.DataFrame:
    """Load, validate and normalise a runs table.

    `source`: a results.csv / Parquet / JSONL path, a folder holding one, a DataFrame, or None for
    the Hub. `problems`: the catalog used to map file names to problem ids (a list of Problem, a
    problems folder, or None for the bundled one). `solutions`: True to read sources from the
    `solutions/` folder beside the table (or record `solution_path`s), or a folder path; None (the
    default) reads them for a local source that has them (a `solutions/` folder beside the table,
    or evaluator records), never from the Hub, so `flag_anomalies` sees what `kbv3 runs
    anomalies --source PATH` sees.

    Returns one row per input row, in input order: the typed runs columns plus `split`,
    `category_hint`, `problem_file`, `problem_id`, `match` ("matched" or why not) and, with
    solutions, `solution_file` and `solution_source`. Raises RunsSchemaError listing bad rows.
    """
    if isinstance(source, pd.DataFrame):
        raw, kind, origin, path = source, _kind_of(source), "runs frame", None
    else:
        path = _resolve_source(source, repo_id, revision, bool(solutions))
        raw, kind = read_runs_table(path)
        origin = str(path)
    if solutions is None:
        solutions = (
            source is not None and path is not None and (kind == "records" or (path.parent / SOLUTIONS_DIR).is_dir())
        )
    header = 1 if path is not None and path.suffix == ".csv" else 0
    runs = validate_runs(raw, origin=origin, records=kind == "records", header_lines=header)
    catalog = _catalog(problems)
    runs = normalize_runs(runs, catalog)
    if kind == "records":
        runs = _drop_cpu_speedups(runs)
    if solutions:
        folder = (
            Path(solutions)
            if not isinstance(solutions, bool)
            else (path.parent / SOLUTIONS_DIR if path is not None else None)
        )
        runs = attach_solutions(runs, folder)
    runs.attrs["source"] = origin
    runs.attrs["kind"] = kind
    runs.attrs["superseded"] = int(raw.attrs.get("superseded", 0))
    return runs


def _drop_cpu_speedups(runs: pd.DataFrame) -> pd.DataFrame:
    """Records timed on the CPU (the Triton interpreter) carry no speedup: that time tests the
    machinery, it is no performance figure. Older records that still hold one lose it here;
    `timing_meaningful` says which rows were timed on a GPU."""
    method = runs["timing_method"] if "timing_method" in runs.columns else pd.Series("", index=runs.index)
    device = runs["device"] if "device" in runs.columns else pd.Series("", index=runs.index)
    on_gpu = method.isin(GPU_TIMING_METHODS)
    meaningful = on_gpu | (method.fillna("").eq("") & device.ne("cpu"))
    if "timing_meaningful" in runs.columns:
        meaningful &= runs["timing_meaningful"].map(lambda v: v is not False)
    runs = runs.copy()
    runs["timing_meaningful"] = meaningful.astype(bool)
    runs.loc[~runs["timing_meaningful"], "speedup"] = np.nan
    return runs


def _catalog(problems: Sequence[Problem] | Path | str | None) -> list[Problem]:
    if problems is None or isinstance(problems, (str, Path)):
        return discover(problems)
    return list(problems)


# ---------------------------------------------------------------- validation


# ---------------------------------------------------------------- normalisation


def normalize_runs(runs: pd.DataFrame, problems: Iterable[Problem]) -> pd.DataFrame:
    """Add `problem_file`, `problem_id`, `category` and `match` ("matched" or why not) per row.

    Records that already carry a `problem_id` keep it when the catalog knows it.
    """
    catalog = list(problems)
    by_file: dict[str, list[Problem]] = {}
    for p in catalog:
        by_file.setdefault(p.file_name, []).append(p)
    known_ids = {p.problem_id: p for p in catalog}

    out = runs.copy()
    files = out["problem"].map(problem_file_name)
    given_ids = out["problem_id"] if "problem_id" in out.columns else pd.Series([None] * len(out))
    keys = list(zip(files, out["category_hint"], out["level"].astype(object), out["split"], given_ids.astype(object)))
    cache: dict[tuple, tuple[str | None, str]] = {}
    ids, matches = [], []
    for key in keys:
        if key not in cache:
            cache[key] = _match_one(*key, by_file=by_file, known_ids=known_ids)
        problem_id, match = cache[key]
        ids.append(problem_id)
        matches.append(match)
    out["problem_file"] = files
    out["problem_id"] = pd.Series(ids, dtype=object)
    out["category"] = out["problem_id"].map(lambda pid: known_ids[pid].category if pid else None)
    out["match"] = matches
    return out


def _match_one(
    file_name: str,
    hint: Any,
    level: Any,
    split: str,
    given_id: Any,
    *,
    by_file: dict[str, list[Problem]],
    known_ids: dict[str, Problem],
) -> tuple[str | None, str]:
    if isinstance(given_id, str) and given_id:
        if given_id in known_ids:
            return given_id, "matched"
        return None, f"unknown problem_id {given_id!r}"
    candidates = by_file.get(file_name, [])
    if not candidates:
        return None, f"no problem file named {file_name!r} in the catalog"
    if isinstance(hint, str):
        candidates = [p for p in candidates if p.category == hint]
        if not candidates:
            return None, f"no {file_name!r} in category {hint!r}"
    in_split = [p for p in candidates if split in p.gpus]
    if not in_split:
        where = ", ".join(p.problem_id for p in candidates)
        return None, f"{where} is not in the {split} split"
    if len(in_split) > 1 and not _is_null(level):
        by_level = [p for p in in_split if p.level == int(level)]
        in_split = by_level or in_split
    if len(in_split) > 1:
        return None, "ambiguous: " + ", ".join(p.problem_id for p in in_split)
    return in_split[0].problem_id, "matched"


# ---------------------------------------------------------------- joining


def problem_table(problems: Iterable[Problem]) -> pd.DataFrame:
    """One row per problem: the catalog columns the analysis needs, plus roofline FLOPs/bytes."""
    from ..hardware.roofline import DEFAULT_ROOFLINE

    rows = []
    for p in problems:
        flops, nbytes = DEFAULT_ROOFLINE.get(p.problem_id, (None, None))
        rows.append(
            {
                "problem_id": p.problem_id,
                "problem_category": p.category,
                "problem_level": p.level,
                "problem_op_type": p.op_type,
                "supported_precisions": ",".join(p.supported_precisions),
                "problem_gpus": ",".join(p.gpus),
                "flops": float(flops) if flops is not None else np.nan,
                "bytes": float(nbytes) if nbytes is not None else np.nan,
            }
        )
    columns = [
        "problem_id",
        "problem_category",
        "problem_level",
        "problem_op_type",
        "supported_precisions",
        "problem_gpus",
        "flops",
        "bytes",
    ]
    return pd.DataFrame(rows, columns=columns)


def join_runs(
    runs: pd.DataFrame,
    problems: Iterable[Problem] | pd.DataFrame,
    facts: pd.DataFrame | None | str = "auto",
    *,
    warn: bool = True,
) -> pd.DataFrame:
    """Every run with its problem's columns beside it; unmatched runs are kept and reported.

    `problems`: the catalog (list of Problem) or a `problem_table`. `facts`: a per-problem
    table (e.g. `runs.facts.facts_table`) merged on `problem_id` as well; "auto" (the default)
    takes the catalog's facts (`facts_table`: the shipped table, computed for a problem it does
    not hold), None merges none. Rows whose problem is unknown keep nulls in the problem
    columns, `matched` False and the reason in `match`; a warning names how many and which.

    The frame carries `attrs["split_totals"]` (problems per split, from the catalog), so
    `leaderboard`, `fast_p` and `flag_anomalies` on it give what `kbv3 runs` prints.
    """
    if isinstance(problems, pd.DataFrame):
        table = problems
        totals = _totals_of_table(table)
        if isinstance(facts, str):
            facts = None  # no catalog to take facts from
    else:
        catalog = list(problems)
        table = problem_table(catalog)
        totals = split_totals(catalog)
        if "match" not in runs.columns:
            runs = normalize_runs(runs, catalog)
        if isinstance(facts, str):
            if facts != "auto":
                raise ValueError(f"facts must be a frame, None or 'auto', got {facts!r}")
            from .facts import facts_table

            facts = facts_table(catalog)
    if "match" not in runs.columns:
        raise ValueError("runs have no `match` column: load them with load_runs or normalize_runs first")
    joined = runs.merge(table, on="problem_id", how="left", sort=False, validate="many_to_one")
    if facts is not None:
        joined = joined.merge(facts, on="problem_id", how="left", sort=False, validate="many_to_one")
    joined.index = runs.index
    joined["matched"] = joined["match"].eq("matched")
    joined.attrs.update(runs.attrs)
    joined.attrs["split_totals"] = totals
    missing = unmatched(joined)
    joined.attrs["unmatched"] = len(missing)
    if warn and len(missing):
        examples = "; ".join(
            f"{r.model}/{r.gpu}/{r.problem}: {r.match}" for r in missing.head(5).itertuples(index=False)
        )
        warnings.warn(
            f"{len(missing)} run(s) match no problem of the catalog and keep null problem columns (e.g. {examples})",
            UnmatchedRunsWarning,
            stacklevel=2,
        )
    return joined


def _totals_of_table(table: pd.DataFrame) -> dict[str, int]:
    splits = table["problem_gpus"].fillna("").str.split(",") if "problem_gpus" in table.columns else None
    if splits is None:
        return {}
    return {gpu: int(splits.map(lambda s, split=split: split in s).sum()) for gpu, split in SPLIT_OF_RUNS_GPU.items()}


class UnmatchedRunsWarning(UserWarning):
    """Some runs match no catalog problem; they are kept with null problem columns."""


def unmatched(joined: pd.DataFrame) -> pd.DataFrame:
    """The runs that match no catalog problem, with the reason in `match`."""
    return joined.loc[joined["match"].ne("matched"), ["model", "gpu", "level", "problem", "match"]]
