"""Scores of several samples per problem: pass@k, fast_p@k and the per-model-and-GPU summary `kbv3 report` prints.

Owns the unbiased estimator of Chen et al. (2021), `pass@k = 1 - C(n-c, k) / C(n, k)` for a
problem with n samples of which c pass, averaged over the problems a model attempted on one GPU
(split), and its use for speed:
`fast_p@k` is the same estimator where a sample passes when it is correct and its speedup over
the baseline is above p (KernelBench's fast_p, best of k). Records without a `sample` column
(one solution per problem) are one sample each.

A problem's runs on two GPUs are two problems, never two samples of one: every figure is per
model and GPU (the record's `gpu`, the split it is reported for), as `kbv3 runs summary`
counts. Each summary names its denominators: `correct` of `samples`, pass@k and fast_p@k as
means over the `problems` attempted, and `solved` of `split_problems` (the problems of that
GPU's split, the leaderboard's `correct/split`), so the report and the leaderboard agree.

A speed figure needs a speedup: records timed on the CPU (through the Triton interpreter) have
none, so a model with any such record gets no speed figure at all (None; `n/a` in text and CSV),
never a 0 that reads as "slower than everything".

The summaries and the per-problem table are data (numbers, booleans or None: what `kbv3 report
--json` prints); `summaries_text`, `summaries_csv` and `problem_table_text` render them.
"""

from __future__ import annotations

import csv
import io
import math
from typing import Any

import numpy as np
import pandas as pd

from ..vocab import plural
from .leaderboard import GPU_ORDER  # RTX3090, H100, B200: the order every table lists GPUs in

FAST_PS = (1.0, 1.5, 2.0)
NA = "n/a"
CPU_SPEED_NOTE = "n/a on CPU: no speedup is measured through the Triton interpreter"


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of one problem with `n` samples, `c` of them passing (k <= n)."""
    if not 0 < k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 < k <= n and 0 <= c <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    # 1 - C(n-c, k) / C(n, k) as a product: no huge binomials.
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def p_label(p: float) -> str:
    """1.0 -> "1", 1.5 -> "1.5": the p of a `fast_<p>@k` key."""
    return f"{p:g}"


def samples_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per sample: model, gpu ("" when the record names none), problem, sample,
    correct, speedup (NaN when none), cpu."""
    frame = pd.DataFrame(index=runs.index)
    frame["model"] = runs["model"].fillna("(unnamed)").replace("", "(unnamed)") if "model" in runs else "(unnamed)"
    gpu = runs["gpu"] if "gpu" in runs.columns else pd.Series("", index=runs.index)
    frame["gpu"] = gpu.map(lambda v: v.strip() if isinstance(v, str) else "")
    problem = runs["problem_id"] if "problem_id" in runs.columns else runs["problem"]
    if "problem" in runs.columns:
        problem = problem.where(problem.notna() & (problem.astype(str) != ""), runs["problem"])
    frame["problem"] = problem.astype(str)
    frame["correct"] = runs["correct"].fillna(False).astype(bool)
    frame["speedup"] = pd.to_numeric(runs.get("speedup"), errors="coerce") if "speedup" in runs else math.nan
    device = runs["device"].astype(str) if "device" in runs.columns else pd.Series("", index=runs.index)
    meaningful = runs["timing_meaningful"] if "timing_meaningful" in runs.columns else pd.Series(None, index=runs.index)
    # timing_meaningful False: timed, but no performance figure (the CPU); None: not timed.
    frame["cpu"] = (device == "cpu") | meaningful.map(lambda v: isinstance(v, (bool, np.bool_)) and not bool(v))
    if "sample" in runs.columns and runs["sample"].notna().any():
        frame["sample"] = pd.to_numeric(runs["sample"], errors="coerce")
    else:
        frame["sample"] = math.nan
    # Records without a sample index are numbered in input order within their model, GPU and problem.
    rank = frame.groupby(["model", "gpu", "problem"]).cumcount()
    frame["sample"] = frame["sample"].fillna(rank).astype(int)
    return frame


def _passes(group: pd.DataFrame, p: float | None) -> int:
    if p is None:
        return int(group["correct"].sum())
    return int((group["correct"] & (group["speedup"] > p)).sum())


def model_summary(samples: pd.DataFrame, split_problems: int | None = None) -> dict[str, Any]:
    """The summary of one model's samples on one GPU (see the module docstring for the
    figures); `split_problems`: how many problems that GPU's split has (None: not known)."""
    groups = [g for _, g in samples.groupby("problem", sort=True)]
    sizes = [len(g) for g in groups]
    k_max = min(sizes)
    speed = not bool(samples["cpu"].any())
    correct = samples[samples["correct"]]
    speedups = correct["speedup"][correct["speedup"] > 0]
    summary: dict[str, Any] = {
        "samples": int(len(samples)),
        "problems": len(groups),
        # pass@k exists up to the fewest samples any problem has.
        "samples_per_problem": k_max,
        "samples_per_problem_max": max(sizes),
        "correct": int(samples["correct"].sum()),
        "correct_rate": float(samples["correct"].mean()),
        # The leaderboard's count: distinct problems with a correct sample, of the whole split.
        "solved": int(sum(bool(g["correct"].any()) for g in groups)),
        "split_problems": split_problems,
    }
    for k in range(1, k_max + 1):
        summary[f"pass@{k}"] = sum(pass_at_k(len(g), _passes(g, None), k) for g in groups) / len(groups)
    for p in FAST_PS:
        for k in range(1, k_max + 1):
            value = sum(pass_at_k(len(g), _passes(g, p), k) for g in groups) / len(groups) if speed else None
            summary[f"fast_{p_label(p)}@{k}"] = value
    summary["geomean_speedup"] = (
        float(np.exp(np.log(speedups.to_numpy(dtype=float)).mean())) if speed and len(speedups) else None
    )
    summary["speed_measured"] = speed
    return summary


def _gpu_rank(gpu: str) -> tuple[int, str]:
    return (GPU_ORDER.index(gpu) if gpu in GPU_ORDER else len(GPU_ORDER), gpu)


def _by_model_and_gpu(frame: pd.DataFrame, *more: str):
    """`((model, gpu, *more), group)` of a samples frame: models by name, GPUs in GPU_ORDER."""
    groups = list(frame.groupby(["model", "gpu", *more], sort=True))
    return sorted(groups, key=lambda item: (item[0][0], _gpu_rank(item[0][1]), *item[0][2:]))


def model_summaries(runs: pd.DataFrame, split_totals: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """One summary per model and GPU of a records frame (`runs.load.load_runs`), each with its
    `model` and `gpu` (None when the records name no GPU). `split_totals`: problems per split
    keyed by the runs dataset's GPU name (`join_runs`' `attrs["split_totals"]`), for `solved`
    of `split_problems`."""
    totals = split_totals or {}
    return [
        {"model": str(model), "gpu": gpu or None, **model_summary(group, totals.get(gpu))}
        for (model, gpu), group in _by_model_and_gpu(samples_frame(runs))
    ]


PROBLEM_COLUMNS = ["model", "gpu", "problem", "samples", "correct", "pass@1", "best_sample", "best_speedup"]


def problem_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per model, GPU and problem: samples, correct, pass@1, its best correct sample
    (the fastest; None when no sample is correct) and that sample's speedup (None when there is
    no correct sample or it has no speedup, e.g. timed on the CPU)."""
    rows = []
    for (model, gpu, problem), group in _by_model_and_gpu(samples_frame(runs), "problem"):
        best = best_first(group).iloc[0]
        correct = bool(best["correct"])
        speed = float(best["speedup"]) if correct and not best["cpu"] and not pd.isna(best["speedup"]) else None
        rows.append(
            {
                "model": model,
                "gpu": gpu or None,
                "problem": problem,
                "samples": len(group),
                "correct": int(group["correct"].sum()),
                "pass@1": float(group["correct"].mean()),
                "best_sample": int(best["sample"]) if correct else None,
                "best_speedup": speed,
            }
        )
    # dtype object: None stays None (an int or float column would make it NaN).
    return pd.DataFrame(rows, columns=PROBLEM_COLUMNS, dtype=object)


PROBLEM_HEADERS = ["model", "GPU", "problem", "samples", "correct/samples", "pass@1", "best sample", "best speedup"]


def problem_table_cells(table: pd.DataFrame) -> list[list[str]]:
    """`problem_table`'s rows as text, in PROBLEM_HEADERS' order: `correct/samples` as `1/2`,
    `n/a` where there is no figure (no correct sample, or a best sample timed on the CPU)."""

    def speed(row: pd.Series) -> str:
        return NA if row["best_speedup"] is None else f"{row['best_speedup']:.3f}x"

    return [
        [
            str(row["model"]),
            row["gpu"] or NA,
            str(row["problem"]),
            str(row["samples"]),
            f"{row['correct']}/{row['samples']}",
            f"{row['pass@1']:.3g}",
            NA if row["best_sample"] is None else str(row["best_sample"]),
            speed(row),
        ]
        for _, row in table.iterrows()
    ]


def problem_table_text(table: pd.DataFrame) -> str:
    """`problem_table` for a reader, as fixed-width columns (`problem_table_cells`)."""
    if table.empty:
        return ""
    return fixed_width([PROBLEM_HEADERS, *problem_table_cells(table)])


def fixed_width(rows: list[list[str]]) -> str:
    """Rows of text cells as left-aligned columns two spaces apart (the first row: headers)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def best_first(samples: pd.DataFrame) -> pd.DataFrame:
    """Rows ordered best first: correct before not, then by speedup (highest first, none last),
    then by sample index. Works on `samples_frame` rows and on records (`correct`, `speedup`)."""
    key = pd.DataFrame(
        {
            "correct": samples["correct"].fillna(False).astype(bool),
            "speedup": pd.to_numeric(samples["speedup"], errors="coerce") if "speedup" in samples else math.nan,
            "sample": pd.to_numeric(samples["sample"], errors="coerce") if "sample" in samples else 0,
        },
        index=samples.index,
    )
    order = key.sort_values(["correct", "speedup", "sample"], ascending=[False, False, True], na_position="last")
    return samples.loc[order.index]


def sort_records_best_first(runs: pd.DataFrame) -> pd.DataFrame:
    """Records grouped by model, GPU and problem in the order of the summaries and the problem
    table (models by name, GPUs in GPU_ORDER, problems by id), each group best sample first:
    every view of a report lists its rows in this one order."""
    if runs.empty:
        return runs
    frame = samples_frame(runs)
    parts = [best_first(runs.loc[g.index]) for _, g in _by_model_and_gpu(frame, "problem")]
    return pd.concat(parts) if parts else runs


def _cell(value: Any) -> str:
    if value is None:
        return NA
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def summary_columns(summaries: list[dict[str, Any]]) -> list[str]:
    """The columns of the summaries as a table (CSV, HTML): `model`, `gpu`, then every figure
    in the order the summaries hold them."""
    return list(dict.fromkeys(["model", "gpu", *(name for s in summaries for name in s)]))


def summary_cells(summaries: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """(columns, rows of text) of the summaries: `n/a` where a figure does not exist."""
    columns = summary_columns(summaries)
    return columns, [[_cell(s.get(c)) if c in s else "" for c in columns] for s in summaries]


def summaries_csv(summaries: list[dict[str, Any]]) -> str:
    """The summaries as CSV: one row per model and GPU, one column per figure (`n/a` where there
    is none)."""
    columns, rows = summary_cells(summaries)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return out.getvalue()


def _figure(value: float | None, suffix: str = "") -> str:
    return NA if value is None else f"{value:.3f}{suffix}"


def summary_line(s: dict[str, Any]) -> str:
    """One model on one GPU, every share with its denominator: correct of the samples, solved of
    the split's problems (the leaderboard's `correct/split`), pass@k and fast_p@k as means over
    the problems attempted, the geometric mean over the correct samples."""
    k, k_max = s["samples_per_problem"], s["samples_per_problem_max"]
    gpu = s["gpu"] or "(no GPU named)"
    passes = ", ".join(f"pass@{i} {s[f'pass@{i}']:.3f}" for i in range(1, k + 1))
    fast = ", ".join(
        f"fast_{p_label(p)}@{i} {_figure(s[f'fast_{p_label(p)}@{i}'])}" for p in FAST_PS for i in sorted({1, k})
    )
    split = s["split_problems"]
    solved = f"{s['solved']}/{split} of the {gpu} split's problems" if split else f"{s['solved']} problems"
    return (
        f"{s['model']} on {gpu}: {plural(s['samples'], 'sample')} of {plural(s['problems'], 'problem')} "
        f"({k if k == k_max else f'{k}-{k_max}'} each); correct {s['correct']}/{s['samples']} samples "
        f"({s['correct_rate']:.1%}); solved {solved}; means over the {plural(s['problems'], 'problem')} "
        f"attempted: {passes}; {fast}; geomean speedup {_figure(s['geomean_speedup'], 'x')} over correct samples"
    )


def summaries_text(summaries: list[dict[str, Any]]) -> str:
    """One line per model and GPU (`summary_line`), and why speed figures are n/a on the CPU."""
    lines = []
    for s in summaries:
        lines.append(summary_line(s))
        if s["geomean_speedup"] is None and not s["speed_measured"]:
            lines.append(f"  speed figures {CPU_SPEED_NOTE}")
    return "\n".join(lines)


__all__ = [
    "FAST_PS",
    "GPU_ORDER",
    "PROBLEM_COLUMNS",
    "PROBLEM_HEADERS",
    "fixed_width",
    "problem_table_cells",
    "summary_cells",
    "summary_columns",
    "summary_line",
    "best_first",
    "model_summaries",
    "model_summary",
    "pass_at_k",
    "plural",
    "problem_table",
    "problem_table_text",
    "samples_frame",
    "sort_records_best_first",
    "summaries_csv",
    "summaries_text",
]
