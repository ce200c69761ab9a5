"""Scores of several samples per problem: pass@k, fast_p@k and the per-model summary `kbv3 report` prints.

Owns the unbiased estimator of Chen et al. (2021), `pass@k = 1 - C(n-c, k) / C(n, k)` for a
problem with n samples of which c pass, averaged over a model's problems, and its use for speed:
`fast_p@k` is the same estimator where a sample passes when it is correct and its speedup over
the baseline is above p (KernelBench's fast_p, best of k). Records without a `sample` column
(one solution per problem) are one sample each.

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
    """One row per sample: model, problem, sample, correct, speedup (NaN when none), cpu."""
    frame = pd.DataFrame(index=runs.index)
    frame["model"] = runs["model"].fillna("(unnamed)").replace("", "(unnamed)") if "model" in runs else "(unnamed)"
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
    # Records without a sample index are numbered in input order within their model and problem.
    rank = frame.groupby(["model", "problem"]).cumcount()
    frame["sample"] = frame["sample"].fillna(rank).astype(int)
    return frame


def _passes(group: pd.DataFrame, p: float | None) -> int:
    if p is None:
        return int(group["correct"].sum())
    return int((group["correct"] & (group["speedup"] > p)).sum())


def model_summary(samples: pd.DataFrame) -> dict[str, Any]:
    """The summary of one model's samples (see the module docstring for the figures)."""
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


def model_summaries(runs: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """`{model: summary}` for every model of a records frame (`runs.load.load_runs`)."""
    samples = samples_frame(runs)
    return {str(model): model_summary(group) for model, group in samples.groupby("model", sort=True)}


PROBLEM_COLUMNS = ["model", "problem", "samples", "correct", "pass@1", "best_sample", "best_speedup"]


def problem_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per model and problem: samples, correct, pass@1, its best correct sample (the
    fastest; None when no sample is correct) and that sample's speedup (None when there is no
    correct sample or it has no speedup, e.g. timed on the CPU)."""
    rows = []
    for (model, problem), group in samples_frame(runs).groupby(["model", "problem"], sort=True):
        best = best_first(group).iloc[0]
        correct = bool(best["correct"])
        speed = float(best["speedup"]) if correct and not best["cpu"] and not pd.isna(best["speedup"]) else None
        rows.append(
            {
                "model": model,
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


def problem_table_text(table: pd.DataFrame) -> str:
    """`problem_table` for a reader: `-` where no sample is correct, `n/a` for a correct best
    sample without a speedup (timed on the CPU), else `1.234x`."""
    if table.empty:
        return ""

    def speed(row: pd.Series) -> str:
        if row["best_sample"] is None:
            return "-"
        return NA if row["best_speedup"] is None else f"{row['best_speedup']:.3f}x"

    shown = table.assign(
        best_sample=table["best_sample"].map(lambda v: "-" if v is None else str(v)),
        best_speedup=table.apply(speed, axis=1),
        **{"pass@1": table["pass@1"].map(lambda v: f"{v:.3g}")},
    )
    return shown.to_string(index=False)


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
    """Records grouped by model and problem (first-seen order), each group best sample first."""
    if runs.empty:
        return runs
    frame = samples_frame(runs)
    parts = [best_first(runs.loc[g.index]) for _, g in frame.groupby(["model", "problem"], sort=False)]
    return pd.concat(parts) if parts else runs


def _cell(value: Any) -> str:
    if value is None:
        return NA
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def summaries_csv(summaries: dict[str, dict[str, Any]]) -> str:
    """The summaries as CSV: one row per model, one column per figure (`n/a` where there is none)."""
    columns = ["model"] + list(dict.fromkeys(name for s in summaries.values() for name in s))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for model, summary in summaries.items():
        writer.writerow([model] + [_cell(summary.get(c)) if c in summary else "" for c in columns[1:]])
    return out.getvalue()


def _figure(value: float | None, suffix: str = "") -> str:
    return NA if value is None else f"{value:.3f}{suffix}"


def plural(count: int, noun: str) -> str:
    """`1 sample`, `2 samples`: a count a reader sees, in the number it has."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def summaries_text(summaries: dict[str, dict[str, Any]]) -> str:
    """One line per model: samples, problems, correct rate, pass@k, fast_p@1 and @k, geomean speedup."""
    lines = []
    for model, s in summaries.items():
        k, k_max = s["samples_per_problem"], s["samples_per_problem_max"]
        passes = ", ".join(f"pass@{i} {s[f'pass@{i}']:.3f}" for i in range(1, k + 1))
        fast = ", ".join(
            f"fast_{p_label(p)}@{i} {_figure(s[f'fast_{p_label(p)}@{i}'])}" for p in FAST_PS for i in sorted({1, k})
        )
        lines.append(
            f"{model}: {plural(s['samples'], 'sample')} over {plural(s['problems'], 'problem')} "
            f"({k if k == k_max else f'{k}-{k_max}'} each), "
            f"correct {s['correct_rate']:.1%}; {passes}; {fast}; geomean speedup {_figure(s['geomean_speedup'], 'x')}"
        )
        if s["geomean_speedup"] is None and not s["speed_measured"]:
            lines.append(f"  speed figures {CPU_SPEED_NOTE}")
    return "\n".join(lines)


__all__ = [
    "FAST_PS",
    "PROBLEM_COLUMNS",
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
