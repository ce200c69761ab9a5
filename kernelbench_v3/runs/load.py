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

The schema itself and row validation live in `runs_schema` (re-exported here).

The `level` column is matched robustly because the published data is not consistent: it holds
1-4 for level1-4 problems but 1 for every graphics / tile_specialized / cutile problem (even
those whose own `SPECIALIZED_LEVEL` is 2), and records may write `"level2"` or a category name.
So problems are matched by file name first; a category written in `level` (`"level3"`,
`"graphics"`) must agree, a bare number only breaks ties between files of the same name.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..catalog.problem import Problem, discover
from ..vocab import SPLIT_OF_RUNS_GPU
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

HUB_REPO_ID = "Infatoshi/kernelbench-v3-runs"
RESULTS_FILE = "results.csv"
SOLUTIONS_DIR = "solutions"


class RunsSourceError(ValueError):
    """A runs source that cannot be found or read (names the path or the Hub repository)."""


# ---------------------------------------------------------------- reading


def read_runs_table(path: Path | str) -> tuple[pd.DataFrame, str]:
    """Raw table and its kind ("runs" or "records") from a CSV, Parquet or JSONL file."""
    path = Path(path)
    if not path.is_file():
        raise RunsSourceError(f"runs file {path} does not exist")
    suffix = path.suffix
    try:
        if suffix == ".csv":
            # Strings only: types are checked by validate_runs, so a bad cell is reported, not guessed.
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        elif suffix in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
        elif suffix == ".jsonl":
            frame = _read_jsonl(path)
        elif suffix == ".json":
            frame = _read_json(path)
        else:
            raise RunsSourceError(f"{path}: unsupported runs file type {suffix!r} (use .csv, .parquet or .jsonl)")
    except RunsSourceError:
        raise
    except Exception as exc:  # a parser error: say which file
        raise RunsSourceError(f"{path}: cannot be read as {suffix}: {exc}") from exc
    if frame.empty:
        what = "a header and no rows" if suffix == ".csv" and len(frame.columns) else "no runs"
        raise RunsSourceError(
            f"{path} holds {what}: there is nothing to analyze; "
            "pass a results.csv or records file with at least one run"
        )
    kind = _kind_of(frame)
    if kind == "records":
        # A batch journal may hold retries: the last record of a (model, GPU, problem) wins.
        keys = [c for c in ("model", "gpu", "problem", "problem_id") if c in frame.columns]
        before = len(frame)
        frame = frame.drop_duplicates(subset=keys, keep="last").reset_index(drop=True)
        frame.attrs["superseded"] = before - len(frame)  # said by `kbv3 report`, never silent
    return frame, kind


def _read_jsonl(path: Path) -> pd.DataFrame:
    """Records of a JSONL file; lines that are not runs (a batch journal's header) are skipped."""
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise RunsSourceError(f"{path} line {number}: not valid JSON ({exc})") from None
            if isinstance(obj, dict) and "problem" in obj:
                rows.append(obj)
    return pd.DataFrame(rows)


def _read_json(path: Path) -> pd.DataFrame:
    """One record (what `kbv3 eval --json` prints) or a list of them."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise RunsSourceError(f"{path}: expected a JSON object (one record) or a list of objects")
    return pd.DataFrame(data)


def _resolve_source(source: Path | str | None, repo_id: str, revision: str | None, solutions: bool) -> Path:
    if source is not None:
        path = Path(source).expanduser()
        if path.is_dir():
            for name in (RESULTS_FILE, "records.parquet", "records.jsonl", "results.parquet"):
                if (path / name).is_file():
                    return path / name
            raise RunsSourceError(f"folder {path} holds no {RESULTS_FILE}, records.parquet or records.jsonl")
        if not path.exists():
            raise RunsSourceError(f"runs source {path} does not exist")
        return path
    why = hub_unreachable()
    if why:
        raise RunsSourceError(f"cannot fetch {RESULTS_FILE} of the Hub dataset {repo_id}: {why}; {offline_hint()}")
    try:
        hf_hub_download, snapshot_download = import_hub()
        if solutions:
            folder = snapshot_download(
                repo_id, repo_type="dataset", revision=revision, allow_patterns=[RESULTS_FILE, f"{SOLUTIONS_DIR}/*"]
            )
            return Path(folder) / RESULTS_FILE
        return Path(hf_hub_download(repo_id, RESULTS_FILE, repo_type="dataset", revision=revision))
    except Exception as exc:
        raise RunsSourceError(
            f"could not fetch {RESULTS_FILE} of the Hub dataset {repo_id} ({type(exc).__name__}: {exc}); "
            f"{offline_hint()}"
        ) from exc


# A small published-schema runs table the checkout ships (tests/fixtures): what to try offline.
SHIPPED_FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "runs" / "published_schema_fixture"
HUB_PROBE_S = 3.0  # how long to wait for a connection to the Hub before saying it is unreachable


def import_hub():
    """`hf_hub_download, snapshot_download`, imported without tqdm's notebook warning: in Jupyter
    without ipywidgets `tqdm.auto` warns "IProgress not found" and falls back to the plain bar,
    which is what the download shows anyway."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        from huggingface_hub import hf_hub_download, snapshot_download
    return hf_hub_download, snapshot_download


def offline_hint() -> str:
    """How to run without the Hub: a local results.csv, and the fixture the checkout ships."""
    hint = "pass --source PATH (load_runs(PATH)): a local results.csv, its folder, or eval-batch records"
    if (SHIPPED_FIXTURE / RESULTS_FILE).is_file():
        hint += f" (the checkout ships a small one: --source {SHIPPED_FIXTURE})"
    return hint


def hub_unreachable() -> str:
    """Why the Hub cannot be used right now ("" when it may be): HF_HUB_OFFLINE is set, or no
    connection to its host within HUB_PROBE_S (so an offline machine fails at once, not after
    the client's retries)."""
    import os
    import threading
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return "HF_HUB_OFFLINE is set"
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    url = urlparse(endpoint)
    host, port = url.hostname or "huggingface.co", url.port or (443 if url.scheme != "http" else 80)
    outcome: list[str] = []

    def probe() -> None:
        import socket

        try:
            socket.create_connection((host, port), timeout=HUB_PROBE_S).close()
            outcome.append("")
        except OSError as exc:
            outcome.append(f"{host} cannot be reached ({exc.strerror or exc})")

    thread = threading.Thread(target=probe, daemon=True)  # name resolution has no timeout of its own
    thread.start()
    thread.join(HUB_PROBE_S + 1.0)
    return outcome[0] if outcome else f"{host} did not answer within {HUB_PROBE_S:g} s"


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
    on_gpu = method.isin(["cuda_events", "supervisor_windows_cuda_graphs", "supervisor_windows_eager"])
    meaningful = on_gpu | (method.fillna("").eq("") & device.ne("cpu"))
    if "timing_meaningful" in runs.columns:
        meaningful &= runs["timing_meaningful"].map(lambda v: v is not False)
    runs = runs.copy()
    runs["timing_meaningful"] = meaningful.astype(bool)
    runs.loc[~runs["timing_meaningful"], "speedup"] = np.nan
    return runs


def _kind_of(frame: pd.DataFrame) -> str:
    return "records" if all(m in frame.columns for m in RECORD_MARKERS[:2]) else "runs"


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
