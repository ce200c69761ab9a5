"""The leaderboard of joined runs, counted like the runs card's table.

Per GPU and model, `correct` is the number of distinct problems with a correct run and `total`
the number of problems in that GPU's split (43, 54, 58 for the full catalog), so a model that
skipped problems is not flattered. The geometric mean speedup is over correct runs; `fast_p`
(KernelBench's metric, p in 0, 1, 1.5, 2) is the share of the split's problems solved correctly
with a best speedup above p (fast_0 = share correct); where no correct run of a model has a
speedup (every one timed on the CPU, or without a baseline) fast_p above 0 is NaN (no figure
exists), never 0; the mean and median fraction of the speed of light are
`speed_of_light.sol_fraction` over correct runs; cost per correct is the summed
`estimated_cost_usd` of all the model's runs on that GPU divided by `correct`. Without a
catalog, `total` is the number of distinct problems anyone ran on that GPU. Also the speedup
distribution per level.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from ..catalog.problem import Problem
from ..vocab import SPLIT_OF_RUNS_GPU
from .speed_of_light import add_roofline, sol_fraction

GPU_ORDER = tuple(SPLIT_OF_RUNS_GPU)


def split_totals(problems: Iterable[Problem]) -> dict[str, int]:
    """Problems per split, keyed by the runs dataset's GPU name ({"RTX3090": 43, ...})."""
    problems = list(problems)
    return {gpu: sum(split in p.gpus for p in problems) for gpu, split in SPLIT_OF_RUNS_GPU.items()}


def _split_totals(problems: Iterable[Problem] | None, joined: pd.DataFrame) -> dict[str, int]:
    if problems is not None:
        return split_totals(problems)
    if "split_totals" in joined.attrs:
        return dict(joined.attrs["split_totals"])
    # Without a catalog: the number of distinct problems anyone ran on that GPU.
    return joined.groupby("gpu")["problem_file"].nunique().to_dict()


def problem_key(joined: pd.DataFrame) -> pd.Series:
    return joined["problem_id"].where(joined["problem_id"].notna(), joined["problem_file"])


FAST_P = (0.0, 1.0, 1.5, 2.0)


def fast_p_column(p: float) -> str:
    """`fast_0`, `fast_1`, `fast_1.5`, `fast_2`: the leaderboard's column for threshold p."""
    return f"fast_{p:g}"


def _best_speedups(good: pd.DataFrame) -> pd.Series:
    """Per problem (of correct runs): the best speedup (NaN when no correct run has one)."""
    return good.groupby("_key")["speedup"].max()


def _fast_share(best: pd.Series, p: float, correct: int, total: int) -> float:
    """fast_p of one (GPU, model): NaN without a total, or for p > 0 when no correct run has a
    speedup (timed on the CPU, or no baseline): 0 would read as "measured and never faster"."""
    if not total:
        return np.nan
    if p == 0 or correct == 0:  # nothing correct: nothing faster either, a measured 0
        return correct / total
    if not best.notna().any():
        return np.nan
    return int((best > p).sum()) / total


def fast_p(joined: pd.DataFrame, thresholds=FAST_P, problems: Iterable[Problem] | None = None) -> pd.DataFrame:
    """One row per (GPU, model, p): `fast_p`, the share of the split's problems that the model
    solved correctly with a speedup above p (KernelBench's fast_p; fast_0 is the share correct).
    A problem counts once, with its best correct run; NaN above p = 0 where no correct run has a
    speedup."""
    totals = _split_totals(problems, joined)
    frame = joined.assign(_key=problem_key(joined), _correct=joined["correct"].fillna(False).astype(bool))
    rows = []
    for (gpu, model), group in frame.groupby(["gpu", "model"], sort=False):
        best = _best_speedups(group[group["_correct"]])
        total = int(totals.get(gpu, 0))
        for p in thresholds:
            rows.append({"gpu": gpu, "model": model, "p": float(p), "fast_p": _fast_share(best, p, len(best), total)})
    return pd.DataFrame(rows, columns=["gpu", "model", "p", "fast_p"])


def leaderboard(joined: pd.DataFrame, problems: Iterable[Problem] | None = None) -> pd.DataFrame:
    """One row per (GPU, model): correct, total, `correct_str` ("33/43"), attempted runs,
    geometric-mean speedup on correct runs, `fast_0` .. `fast_2` (share of the split's problems
    correct with a speedup above p; fast_0 = share correct; NaN above 0 where no correct run
    has a speedup), the mean and median fraction of the speed of light reached by correct runs
    (`speed_of_light.sol_fraction`: 1 = at the roofline of the fastest precision in reach; NaN
    without roofline figures), total cost and cost per correct problem."""
    totals = _split_totals(problems, joined)
    if "sol_light_ms" not in joined.columns and {"flops", "bytes", "supported_precisions"} <= set(joined.columns):
        joined = add_roofline(joined)
    frame = joined.assign(
        _key=problem_key(joined),
        _correct=joined["correct"].fillna(False).astype(bool),
        _sol_fraction=sol_fraction(joined),
    )
    fast_columns = [fast_p_column(p) for p in FAST_P]
    rows = []
    for (gpu, model), group in frame.groupby(["gpu", "model"], sort=False):
        good = group[group["_correct"]]
        correct = int(good["_key"].nunique())
        speedups = good["speedup"].dropna()
        speedups = speedups[speedups > 0]
        best = _best_speedups(good)
        fractions = good["_sol_fraction"].dropna()
        cost = group["estimated_cost_usd"].sum(min_count=1)
        total = int(totals.get(gpu, 0))
        row = {
            "gpu": gpu,
            "model": model,
            "correct": correct,
            "total": total,
            "correct_str": f"{correct}/{total}",
            "attempted": int(group["_key"].nunique()),
            "geomean_speedup": float(np.exp(np.log(speedups).mean())) if len(speedups) else np.nan,
        }
        for p, column in zip(FAST_P, fast_columns):
            row[column] = _fast_share(best, p, correct, total)
        row.update(
            {
                "mean_sol_fraction": float(fractions.mean()) if len(fractions) else np.nan,
                "median_sol_fraction": float(fractions.median()) if len(fractions) else np.nan,
                "cost_usd": float(cost) if pd.notna(cost) else np.nan,
                "cost_per_correct": float(cost) / correct if correct and pd.notna(cost) else np.nan,
            }
        )
        rows.append(row)
    board = pd.DataFrame(
        rows,
        columns=[
            "gpu",
            "model",
            "correct",
            "total",
            "correct_str",
            "attempted",
            "geomean_speedup",
            *fast_columns,
            "mean_sol_fraction",
            "median_sol_fraction",
            "cost_usd",
            "cost_per_correct",
        ],
    )
    board["_gpu_order"] = board["gpu"].map({g: i for i, g in enumerate(GPU_ORDER)})
    board = board.sort_values(["_gpu_order", "correct", "model"], ascending=[True, False, True])
    return board.drop(columns="_gpu_order").reset_index(drop=True)


def card_table(board: pd.DataFrame) -> pd.DataFrame:
    """The card's layout: one row per model, one `correct/total` column per GPU."""
    wide = board.pivot(index="model", columns="gpu", values="correct_str")
    wide = wide[[g for g in GPU_ORDER if g in wide.columns]]
    order = board.groupby("model")["correct"].sum().sort_values(ascending=False, kind="stable").index
    return wide.loc[order].fillna("n/a").rename_axis(columns=None)  # n/a: no run on that GPU, as every table says


def level_group(joined: pd.DataFrame) -> pd.Series:
    """The catalog category when matched (level1..4, graphics, ...), else "level<N>" from the runs."""
    category = joined["problem_category"] if "problem_category" in joined.columns else joined["category"]
    fallback = joined["level"].map(lambda v: f"level{v}" if pd.notna(v) else "unknown")
    return category.where(category.notna(), fallback)


def speedup_distribution(joined: pd.DataFrame) -> pd.DataFrame:
    """Per (GPU, level group): count, geometric mean, median, p10, p90, max and the share > 1x,
    over correct runs with a speedup."""
    good = joined[joined["correct"].fillna(False).astype(bool) & (joined["speedup"] > 0)]
    good = good.assign(level_group=level_group(good), _log=np.log(good["speedup"]))
    stats = (
        good.groupby(["gpu", "level_group"])
        .agg(
            runs=("speedup", "size"),
            geomean=("_log", lambda s: float(np.exp(s.mean()))),
            median=("speedup", "median"),
            p10=("speedup", lambda s: s.quantile(0.1)),
            p90=("speedup", lambda s: s.quantile(0.9)),
            max=("speedup", "max"),
            faster_share=("speedup", lambda s: float((s > 1).mean())),
        )
        .reset_index()
    )
    stats["_gpu_order"] = stats["gpu"].map({g: i for i, g in enumerate(GPU_ORDER)})
    return stats.sort_values(["_gpu_order", "level_group"]).drop(columns="_gpu_order").reset_index(drop=True)


# What a reader of the leaderboard must know to read its shares: every one is of the whole split.
BOARD_NOTE = (
    "correct/split: problems with a correct run / problems in that GPU's split; fast_p: the same "
    "share with a best speedup above p (fast_0 = correct/split); attempted: problems run; geomean "
    "speedup and the SOL fractions: over the correct runs"
)


def display_board(board: pd.DataFrame) -> pd.DataFrame:
    """`leaderboard` for a reader: the count `correct/split` ("6/54") in place of the separate
    `correct` and `total` numbers, so the share's denominator is in its header."""
    return board.drop(columns=["correct", "total"]).rename(columns={"correct_str": "correct/split"})
