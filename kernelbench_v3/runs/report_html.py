"""`kbv3 report --html`: the report as one self-contained HTML page.

The page shows what the terminal shows, in the same order (`report.report_parts`): the summary
per model and GPU (pass@k, fast_p@k, each share with its denominator), the per-problem table,
every record with its notes and flags; then what only a
page has room for: the leaderboard of the records over their whole splits, and its figures
(fast_p per model, speedup by level). Rendered from a Jinja2 template with autoescape
(`templates/report.html.j2`); the figures are PNG data URIs, so the page needs no other file.
"""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np
import pandas as pd

from .report import HEADERS, NA, REPORT_COLUMNS, flag_items, render_rows, report_notes, report_parts, status_counts
from .speed_of_light import timed_on_gpu

CPU_BOARD_NOTE = (
    "{n} record(s) evaluated on the CPU count for correctness only: their speedup, fast_p above 0 and "
    "speed-of-light fraction are n/a (interpreter timing tests the machinery)"
)


def _figure_uri(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _board_cell(value: Any) -> str:
    if isinstance(value, (float, np.floating)):
        return NA if np.isnan(value) else f"{value:.3g}"
    return NA if value is None or value is pd.NA else str(value)


def _environment():
    from jinja2 import Environment, PackageLoader, select_autoescape

    return Environment(
        loader=PackageLoader("kernelbench_v3.runs", "templates"),
        autoescape=select_autoescape(["html", "j2"], default_for_string=True, default=True),
        keep_trailing_newline=True,
    )


def _summaries(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    from .pass_at_k import summary_cells, summary_line

    headers, rows = summary_cells(summaries)
    return {"headers": headers, "rows": rows, "lines": [summary_line(s) for s in summaries]}


def _leaderboard(joined: pd.DataFrame) -> tuple[dict[str, Any], list[dict[str, str]]]:
    from . import plots
    from .leaderboard import BOARD_NOTE, display_board, leaderboard

    board = display_board(leaderboard(joined))
    cpu = int((~timed_on_gpu(joined)).sum())
    table = {
        "headers": list(board.columns),
        "rows": [[_board_cell(v) for v in row] for row in board.itertuples(index=False)],
        "notes": [BOARD_NOTE] + ([CPU_BOARD_NOTE.format(n=cpu)] if cpu else []),
    }
    figures = [("fast_p per model", plots.fast_p_curves)]
    if joined["speedup"].notna().any():
        figures.append(("speedup by level", plots.speedup_by_level))
    return table, [{"name": name, "uri": _figure_uri(draw(joined))} for name, draw in figures]


def html_page(
    runs: pd.DataFrame,
    joined: pd.DataFrame | None = None,
    title: str = "kbv3 report",
    flags: pd.DataFrame | None = None,
) -> str:
    """One self-contained HTML page of `load_report`'s (runs, joined, flags). Without `joined`
    (the records joined with the catalog and the roofline) the page has no SOL figures and no
    leaderboard."""
    from .pass_at_k import PROBLEM_HEADERS, problem_table_cells

    frame = joined if joined is not None else runs
    parts = report_parts(runs, frame, flags)
    table = render_rows(parts["records"])
    context: dict[str, Any] = {
        "title": title,
        "summary": status_counts(table),
        "source": str(runs.attrs.get("source", "")),
        "summaries": _summaries(parts["summaries"]),
        "problems": {"headers": PROBLEM_HEADERS, "rows": problem_table_cells(parts["problems"])},
        "headers": HEADERS,
        "rows": [
            {"status": row["status"], "cells": [(name, str(row[name])) for name in REPORT_COLUMNS]}
            for _, row in table.iterrows()
        ],
        "notes": report_notes(table, runs),
        "flagged": flag_items(flags),
        "board": None,
        "figures": [],
    }
    if joined is not None and len(joined):
        context["board"], context["figures"] = _leaderboard(joined)
    return _environment().get_template("report.html.j2").render(**context)


__all__ = ["html_page"]
