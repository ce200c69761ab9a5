"""`kbv3 report`: evaluator records (eval-batch Parquet/JSONL, the demo's records.jsonl, one
`kbv3 eval --json` object) as a table a person reads, in the terminal or as one HTML page.

One row per record: the problem, the model and GPU (the split reported for), the status, the
failed check and its reason, the scored time, the speedup (`n/a on CPU`: a time through the
Triton interpreter tests the machinery, it is no performance figure) and the fraction of the
speed of light reached. The HTML page is self-contained (styles inline, figures as PNG data
URIs): the same table, the leaderboard of the records and its figures (fast_p per model,
speedup by level).
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any

import pandas as pd

CPU_SPEEDUP = "n/a on CPU"
CPU_NOTE = "n/a on CPU: CPU timing through the Triton interpreter tests the machinery; it is no performance figure"
REPORT_COLUMNS = ["problem", "model", "gpu", "status", "failed_check", "reason", "scored_ms", "speedup", "sol_fraction"]


def _first_line(text: Any, limit: int = 160) -> str:
    if not isinstance(text, str) or not text.strip():
        return ""
    line = text.strip().splitlines()[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _timed_on_cpu(row: pd.Series) -> bool:
    if "timing_meaningful" in row and row["timing_meaningful"] is not None and not pd.isna(row["timing_meaningful"]):
        return not bool(row["timing_meaningful"])
    return row.get("device") == "cpu"


def report_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per record (columns REPORT_COLUMNS), from a frame of `runs.load.load_runs`.

    `speedup` and `sol_fraction` are text: a number, `n/a on CPU (...)` or `-`."""
    rows = []
    for _, row in runs.iterrows():
        status = row.get("status")
        if not isinstance(status, str) or not status:
            status = "correct" if bool(row.get("correct")) else "incorrect"
        speedup = row.get("speedup")
        if speedup is not None and not pd.isna(speedup):
            speed = f"{float(speedup):.3f}x"
        elif status == "correct" and _timed_on_cpu(row):
            speed = CPU_SPEEDUP
        else:
            speed = "-"
        fraction = row.get("sol_fraction")
        sol_ms = row.get("sol_ms")
        failed = row.get("failed_check")
        rows.append(
            {
                "problem": row.get("problem_id") if isinstance(row.get("problem_id"), str) else row.get("problem"),
                "model": row.get("model") or "(unnamed)",
                "gpu": row.get("gpu") or "",
                "status": status,
                "failed_check": failed if isinstance(failed, str) else "",
                "reason": _first_line(row.get("error")) if status != "correct" else "",
                "scored_ms": f"{float(sol_ms):.4g}" if sol_ms is not None and not pd.isna(sol_ms) else "-",
                "speedup": speed,
                "sol_fraction": f"{float(fraction):.1%}" if fraction is not None and not pd.isna(fraction) else "-",
            }
        )
    return pd.DataFrame(rows, columns=REPORT_COLUMNS)


def terminal_text(table: pd.DataFrame, width: int = 60) -> str:
    """The table as left-aligned fixed-width text (the reason cut to `width` characters), then
    a count of statuses and, where a speedup is `n/a on CPU`, why."""
    shown = table.assign(reason=table["reason"].map(lambda r: r if len(r) <= width else r[: width - 3] + "..."))
    headers = ["problem", "model", "gpu", "status", "failed check", "reason", "scored ms", "speedup", "SOL"]
    rows = [headers] + [[str(v) for v in row] for row in shown.itertuples(index=False)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    counts = table["status"].value_counts()
    lines += ["", f"{len(table)} record(s): " + ", ".join(f"{n} {s}" for s, n in counts.items())]
    if (table["speedup"] == CPU_SPEEDUP).any():
        lines.append(CPU_NOTE)
    return "\n".join(lines)


def _figure_uri(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
tr.correct td.status { color: #176317; font-weight: bold; }
tr.incorrect td.status, tr.failed td.status, tr.error td.status, tr.incomplete td.status { color: #b00020; font-weight: bold; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
p.note { color: #555; }
"""


def html_page(runs: pd.DataFrame, joined: pd.DataFrame | None = None, title: str = "kbv3 report") -> str:
    """One self-contained HTML page: the records' table, their leaderboard and its figures."""
    table = report_table(runs)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in REPORT_COLUMNS)
    body = []
    for row in table.itertuples(index=False):
        cells = "".join(
            f'<td class="{name}">{html.escape(str(value))}</td>' for name, value in zip(REPORT_COLUMNS, row)
        )
        body.append(f'<tr class="{html.escape(row.status)}">{cells}</tr>')
    counts = ", ".join(f"{n} {s}" for s, n in table["status"].value_counts().items())
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>',
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{len(table)} record(s): {html.escape(counts)}. Source: {html.escape(str(runs.attrs.get('source', '')))}</p>",
        '<h2>Records</h2><table id="records"><thead><tr>' + head + "</tr></thead><tbody>",
        *body,
        "</tbody></table>",
    ]
    if (table["speedup"] == CPU_SPEEDUP).any():
        parts.append(f'<p class="note">{html.escape(CPU_NOTE)}.</p>')
    if joined is not None and len(joined):
        from . import plots
        from .leaderboard import leaderboard

        board = leaderboard(joined)
        shown = board.drop(columns=["correct", "total"]).rename(columns={"correct_str": "correct"})
        parts.append("<h2>Leaderboard</h2>")
        parts.append(
            shown.to_html(index=False, na_rep="-", float_format=lambda v: f"{v:.3g}", border=0, table_id="leaderboard")
        )
        figures = [("fast_p per model", plots.fast_p_curves)]
        if joined["speedup"].notna().any():
            figures.append(("speedup by level", plots.speedup_by_level))
        parts.append("<h2>Figures</h2>")
        for name, draw in figures:
            parts.append(f'<figure><img alt="{html.escape(name)}" src="{_figure_uri(draw(joined))}"></figure>')
    parts.append("</body></html>")
    return "\n".join(parts)


def load_report(source: Path | str, problems=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(records as loaded, records joined with the catalog) of a records file."""
    import warnings

    from ..catalog.problem import discover
    from .load import join_runs, load_runs

    catalog = discover(problems) if problems is None or isinstance(problems, (str, Path)) else list(problems)
    runs = load_runs(source, problems=catalog, solutions=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unmatched records are still listed in the table
        joined = join_runs(runs, catalog, None)
    return runs, joined


__all__ = ["CPU_SPEEDUP", "REPORT_COLUMNS", "html_page", "load_report", "report_table", "terminal_text"]
