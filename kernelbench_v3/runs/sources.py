"""Where a runs table comes from: a local file (a published `results.csv`, Parquet or JSONL of
evaluator records, one `kbv3 eval --json` object), a folder holding one, or the Hub dataset.

Owns reading each file type into a raw frame and telling runs from records, resolving a source
(folder, file or the Hub), and, when the Hub cannot be reached, saying so at once with the way
forward: `RunsSourceError.local_source` marks that error, so each caller words the way in its
own terms (`--source PATH` on the command line; the notebook falls back to the shipped fixture).
Validation, normalisation and joining are `load`'s.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd

from ..hub_reach import hub_unreachable
from .schema import RECORD_MARKERS

HUB_REPO_ID = "Infatoshi/kernelbench-v3-runs"
RESULTS_FILE = "results.csv"
SOLUTIONS_DIR = "solutions"


class RunsSourceError(ValueError):
    """A runs source that cannot be found or read (names the path or the Hub repository).

    `local_source` is True when the Hub was asked for and cannot be used: a local source
    (SHIPPED_FIXTURE in a checkout) is the way forward."""

    def __init__(self, message: str, *, local_source: bool = False, reason: str = ""):
        super().__init__(message)
        self.local_source = local_source
        self.reason = reason or message

    def worded_for(self, flag: str) -> str:
        """The message with the way forward in the caller's terms (`--source` for the CLI)."""
        return f"{self.reason}; {offline_hint(flag)}" if self.local_source else str(self)


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
        # A batch journal may hold retries: the last record of a (model, GPU, problem, sample) wins.
        keys = [c for c in ("model", "gpu", "problem", "problem_id", "sample") if c in frame.columns]
        before = len(frame)
        # The index stays each record's line in the file (0-based): `kbv3 runs anomalies` names a
        # run by that row, which a reset would shift past every superseded line.
        frame = frame.drop_duplicates(subset=keys, keep="last")
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
        reason = f"cannot fetch {RESULTS_FILE} of the Hub dataset {repo_id}: {why}"
        raise RunsSourceError(f"{reason}; {offline_hint()}", local_source=True, reason=reason)
    try:
        hf_hub_download, snapshot_download = import_hub()
        if solutions:
            folder = snapshot_download(
                repo_id, repo_type="dataset", revision=revision, allow_patterns=[RESULTS_FILE, f"{SOLUTIONS_DIR}/*"]
            )
            return Path(folder) / RESULTS_FILE
        return Path(hf_hub_download(repo_id, RESULTS_FILE, repo_type="dataset", revision=revision))
    except Exception as exc:
        reason = f"could not fetch {RESULTS_FILE} of the Hub dataset {repo_id} ({type(exc).__name__}: {exc})"
        raise RunsSourceError(f"{reason}; {offline_hint()}", local_source=True, reason=reason) from exc


# A small published-schema runs table the checkout ships (tests/fixtures): what to try offline.
SHIPPED_FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "runs" / "published_schema_fixture"


def import_hub():
    """`hf_hub_download, snapshot_download`, imported without tqdm's notebook warning: in Jupyter
    without ipywidgets `tqdm.auto` warns "IProgress not found" and falls back to the plain bar,
    which is what the download shows anyway."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        from huggingface_hub import hf_hub_download, snapshot_download
    return hf_hub_download, snapshot_download


def offline_hint(flag: str = "") -> str:
    """How to run without the Hub: a local results.csv, and the fixture the checkout ships.
    `flag` is how the caller takes a source (`--source` on the command line); without it the
    hint speaks of a path, as a library (and a notebook) takes one."""
    how = f"pass {flag} PATH" if flag else "load a local source instead"
    hint = f"{how}: a results.csv, its folder, or eval-batch records"
    if (SHIPPED_FIXTURE / RESULTS_FILE).is_file():
        hint += f" (the checkout ships a small one: {flag + ' ' if flag else ''}{SHIPPED_FIXTURE})"
    return hint


def _kind_of(frame: pd.DataFrame) -> str:
    return "records" if all(m in frame.columns for m in RECORD_MARKERS[:2]) else "runs"
