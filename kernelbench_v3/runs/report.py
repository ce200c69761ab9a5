"""`kbv3 report`: evaluator records (eval-batch Parquet/JSONL, the demo's records.jsonl, one
`kbv3 eval --json` object) or a published runs table as a table a person reads, in the terminal
or as one HTML page.

One row per record: the problem, the model, the split it is reported for and the device it ran
on, the status, the failed check and its reason, the scored time, the speedup, the fraction of
the speed of light reached (`speed_of_light.sol_fraction`, the figure the leaderboard averages)
and the anomaly flags of the row (`anomalies.flag_anomalies`, so a faster-than-light row is
flagged where it is shown). `n/a` marks every figure that does not exist: a CPU time through the
Triton interpreter tests the machinery and is no performance figure, an incorrect solution has
no speedup.

Every view shows the same sections in the same order (`report_parts`): the summary per model
and GPU (`pass_at_k`: pass@k, fast_p@k, each share with its denominator), the per-problem table
(always, also with one sample per problem: every view has the same parts), then the records
grouped as those tables list them, each problem's best sample first. The terminal (`report_text`), `--json` (`report_data`) and the HTML
page (`report_html`) render those parts; none sorts or counts on its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .speed_of_light import sol_fraction, timed_on_gpu

NA = "n/a"
CPU_SPEEDUP = "n/a on CPU"
CPU_NOTE = "n/a on CPU: CPU timing through the Triton interpreter tests the machinery; it is no performance figure"
# The records' data, one row per record (`report_rows`; `kbv3 report --json`'s `records`):
# figures are numbers or None, never display text. `timed_on_gpu` False marks a CPU time, whose
# speedup and speed-of-light fraction do not exist (None) for that reason.
RECORD_FIELDS = [
    "problem",
    "model",
    "sample",
    "split",
    "ran_on",
    "status",
    "failed_check",
    "reason",
    "scored_ms",
    "speedup",
    "sol_fraction",
    "timed_on_gpu",
    "flags",
]
# The table a person reads (`report_table`): the same rows rendered as text.
REPORT_COLUMNS = [
    "problem",
    "model",
    "sample",
    "split",
    "ran_on",
    "status",
    "failed_check",
    "reason",
    "scored_ms",
    "speedup",
    "sol_fraction",
    "flags",
]
HEADERS = [
    "problem",
    "model",
    "sample",
    "split",
    "ran on",
    "status",
    "failed check",
    "reason",
    "scored ms",
    "speedup",
    "SOL",
    "flags",
]


def _first_line(text: Any, limit: int = 160) -> str:
    if not isinstance(text, str) or not text.strip():
        return ""
    line = text.strip().splitlines()[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and np.isnan(value)) and value is not pd.NA


def _number(value: Any) -> float | None:
    return float(value) if _present(value) else None


def _ran_on(row: pd.Series) -> str:
    """Where the run was timed: the record's `ran_on`; `cpu` for an older CPU record; a published
    run (no such column) ran on the GPU it is listed under."""
    ran_on = row.get("ran_on")
    if isinstance(ran_on, str) and ran_on:
        return ran_on
    if row.get("device") == "cpu":
        return "cpu"
    gpu = row.get("gpu")
    return gpu if isinstance(gpu, str) and "ran_on" not in row.index else "?"


def _flag_lists(flags: pd.DataFrame | None) -> dict[Any, list[str]]:
    if flags is None or flags.empty:
        return {}
    return flags.groupby("run", observed=True)["flag"].agg(lambda s: [str(f) for f in s]).to_dict()


def _sample_numbers(runs: pd.DataFrame) -> pd.Series:
    """Each record's sample index as the per-problem table counts it (`pass_at_k.samples_frame`:
    the record's own `sample`, else its place among the model's records of that problem in file
    order), so a row's sample is the one `best_sample` names, however the rows are sorted."""
    from .pass_at_k import samples_frame

    if runs.empty:
        return pd.Series(dtype=int)
    return samples_frame(runs.sort_index())["sample"]


def report_rows(runs: pd.DataFrame, flags: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per record (columns RECORD_FIELDS), as data: figures are floats or None, `flags` a
    list of flag names. `runs`: a frame of `runs.load.load_runs` (or `join_runs` with
    `add_roofline`, which gives published runs their speed-of-light fraction); `flags`:
    `flag_anomalies` of that frame, keyed by its index."""
    fractions = sol_fraction(runs)
    on_gpu = timed_on_gpu(runs)
    flagged = _flag_lists(flags)
    samples = _sample_numbers(runs)
    rows = []
    for label, row in runs.iterrows():
        status = row.get("status")
        if not isinstance(status, str) or not status:
            status = "correct" if bool(row.get("correct")) else "incorrect"
        failed = row.get("failed_check")
        reason = _first_line(row.get("error")) if status != "correct" else ""
        rows.append(
            {
                "problem": row.get("problem_id") if isinstance(row.get("problem_id"), str) else row.get("problem"),
                "model": row.get("model") or "(unnamed)",
                "sample": int(samples[label]),
                "split": row.get("gpu") or "",
                "ran_on": _ran_on(row),
                "status": status,
                "failed_check": failed if isinstance(failed, str) and failed else None,
                "reason": reason or None,
                "scored_ms": _number(row.get("sol_ms")),
                "speedup": _number(row.get("speedup")),
                "sol_fraction": _number(fractions[label]),
                "timed_on_gpu": bool(on_gpu[label]),
                "flags": flagged.get(label, []),
            }
        )
    # dtype object: a missing figure stays None (a float column would turn it into NaN).
    return pd.DataFrame(rows, columns=RECORD_FIELDS, dtype=object)


def report_table(runs: pd.DataFrame, flags: pd.DataFrame | None = None) -> pd.DataFrame:
    """`report_rows` rendered for a reader (columns REPORT_COLUMNS, every cell text): a number,
    `n/a on CPU` (a correct solution timed on the CPU has no speedup) or `n/a` (no such figure)."""
    return render_rows(report_rows(runs, flags))


def render_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The text of `report_rows`' rows."""

    def speed(row: pd.Series) -> str:
        if row["speedup"] is not None:
            return f"{row['speedup']:.3f}x"
        return CPU_SPEEDUP if row["status"] == "correct" and not row["timed_on_gpu"] else NA

    text = pd.DataFrame(
        {
            "problem": rows["problem"],
            "model": rows["model"],
            "sample": rows["sample"].map(str),
            "split": rows["split"],
            "ran_on": rows["ran_on"],
            "status": rows["status"],
            "failed_check": rows["failed_check"].map(lambda v: v or ""),
            "reason": rows["reason"].map(lambda v: v or ""),
            "scored_ms": rows["scored_ms"].map(lambda v: NA if v is None else f"{v:.4g}"),
            "speedup": rows.apply(speed, axis=1) if len(rows) else pd.Series(dtype=object),
            "sol_fraction": rows["sol_fraction"].map(lambda v: NA if v is None else f"{v:.1%}"),
            "flags": rows["flags"].map(", ".join),
        },
        columns=REPORT_COLUMNS,
    )
    return text.reset_index(drop=True)


def report_notes(table: pd.DataFrame, runs: pd.DataFrame) -> list[str]:
    """What the table's reader must know: why figures are n/a, which rows a file held twice."""
    notes = []
    if (table["speedup"] == CPU_SPEEDUP).any():
        notes.append(CPU_NOTE)
    superseded = int(runs.attrs.get("superseded", 0))
    if superseded:
        notes.append(
            f"{superseded} earlier record(s) of the same model, split and problem in this file were superseded "
            "by later ones (a rerun appends); the last of each is shown"
        )
    if table["flags"].ne("").any():
        notes.append(
            f"{int(table['flags'].ne('').sum())} row(s) flagged as anomalies: their figures are doubtful "
            "(reasons below; `kbv3 runs anomalies --source FILE` runs every check)"
        )
    return notes


def terminal_text(table: pd.DataFrame, width: int = 60, runs: pd.DataFrame | None = None, flags=None) -> str:
    """The table as left-aligned fixed-width text (the reason cut to `width` characters), then
    a count of statuses and the notes: why a figure is n/a, superseded records, and each flag
    with its reason."""
    from .pass_at_k import fixed_width

    shown = table.assign(reason=table["reason"].map(lambda r: r if len(r) <= width else r[: width - 3] + "..."))
    lines = [fixed_width([HEADERS] + [[str(v) for v in row] for row in shown.itertuples(index=False)])]
    lines += ["", status_counts(table)]
    lines += report_notes(table, runs if runs is not None else pd.DataFrame())
    for item in flag_items(flags):
        lines.append(f"  {item['problem']} ({item['model']}, {item['gpu']}) {item['flag']}: {item['reason']}")
    return "\n".join(lines)


def status_counts(table: pd.DataFrame) -> str:
    """`6 record(s): 4 correct, 1 incorrect, 1 failed`: statuses in the vocabulary's order (the
    same line in every view, whatever order the rows come in), others after."""
    from ..vocab import STATUSES

    counts = table["status"].value_counts()
    order = [s for s in STATUSES if s in counts.index] + sorted(set(counts.index) - set(STATUSES))
    return f"{len(table)} record(s): " + ", ".join(f"{counts[s]} {s}" for s in order)


def flag_items(flags: pd.DataFrame | None) -> list[dict[str, str]]:
    """Each flag of `flag_anomalies` as the text a reader sees: which row, which flag, why."""
    if flags is None or flags.empty:
        return []
    return [
        {
            "problem": str(r.problem_id if isinstance(r.problem_id, str) else r.problem),
            "model": str(r.model or "(unnamed)"),
            "gpu": str(r.gpu),
            "flag": str(r.flag),
            "reason": str(r.reason),
        }
        for r in flags.itertuples(index=False)
    ]


def report_parts(runs: pd.DataFrame, joined: pd.DataFrame, flags: pd.DataFrame | None = None) -> dict[str, Any]:
    """What every view of a report shows, in its one order: `summaries` (one per model and GPU,
    `pass_at_k.model_summaries` with the split sizes of `joined`), `problems`
    (`pass_at_k.problem_table`), `records` (`report_rows` of the records in that same order,
    each problem's best sample first). `runs`, `joined`, `flags`: what `load_report` returns."""
    from .pass_at_k import model_summaries, problem_table, sort_records_best_first

    return {
        "summaries": model_summaries(runs, joined.attrs.get("split_totals")),
        "problems": problem_table(runs),
        "records": report_rows(sort_records_best_first(joined), flags),
    }


def report_data(runs: pd.DataFrame, joined: pd.DataFrame, flags: pd.DataFrame | None = None) -> dict[str, Any]:
    """`kbv3 report --json`: the summaries per model and GPU, the per-problem rows and every
    record, as data (numbers, booleans, strings that name things, or None; never a figure as
    text). The schema it follows is `report.schema.json` beside this module."""
    parts = report_parts(runs, joined, flags)
    return {
        "models": [{k: _plain(v) for k, v in s.items()} for s in parts["summaries"]],
        "problems": [{k: _plain(v) for k, v in row.items()} for row in parts["problems"].to_dict("records")],
        "records": [{k: _plain(v) for k, v in row.items()} for row in parts["records"].to_dict("records")],
    }


def report_text(runs: pd.DataFrame, joined: pd.DataFrame, flags: pd.DataFrame | None = None) -> str:
    """`kbv3 report` in the terminal: the summaries, the per-problem table, then every record
    and the notes (`terminal_text`)."""
    from .pass_at_k import problem_table_text, summaries_text

    parts = report_parts(runs, joined, flags)
    sections = [summaries_text(parts["summaries"]), problem_table_text(parts["problems"])]
    sections.append(terminal_text(render_rows(parts["records"]), runs=runs, flags=flags))
    return "\n\n".join(sections)


def _plain(value: Any) -> Any:
    """A cell as JSON data: numpy scalars as Python numbers, NaN/NA as None."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if not isinstance(value, str) and not _present(value):
        return None
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    return value


SCHEMA_PATH = Path(__file__).with_name("report.schema.json")


def load_report(source: Path | str, problems=None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(records as loaded, records joined with the catalog and the roofline, their anomaly
    flags) of a records file or runs table."""
    import warnings

    from ..catalog.problem import discover
    from .anomalies import flag_anomalies
    from .load import join_runs, load_runs
    from .speed_of_light import add_roofline

    catalog = discover(problems) if problems is None or isinstance(problems, (str, Path)) else list(problems)
    runs = load_runs(source, problems=catalog, solutions=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unmatched records are still listed in the table
        joined = add_roofline(join_runs(runs, catalog, None))
    return runs, joined, flag_anomalies(joined)


__all__ = [
    "CPU_SPEEDUP",
    "NA",
    "RECORD_FIELDS",
    "REPORT_COLUMNS",
    "flag_items",
    "load_report",
    "render_rows",
    "report_notes",
    "status_counts",
    "report_data",
    "report_parts",
    "report_text",
    "SCHEMA_PATH",
    "report_rows",
    "report_table",
    "terminal_text",
]
