"""Analysis of joined runs: leaderboards, speedup distributions and anomaly flags with reasons.

Input is the frame of `runs.join_runs` (optionally with `problem_facts.facts_table` merged in).

The leaderboard counts like the runs card's table: per GPU and model, `correct` is the number of
distinct problems with a correct run and `total` the number of problems in that GPU's split (43,
54, 58 for the full catalog), so a model that skipped problems is not flattered. The geometric
mean speedup is over correct runs; `fast_p` (KernelBench's metric, p in 0, 1, 1.5, 2) is the
share of the split's problems solved correctly with a best speedup above p (fast_0 = share
correct); the mean and median fraction of the speed of light are `sol_light_ms / sol_ms` over
correct runs; cost per correct is the summed `estimated_cost_usd` of all the model's runs on that
GPU divided by `correct`. Without a catalog, `total` is the number of distinct problems anyone
ran on that GPU.

Anomaly flags (one row per run and flag, each with a reason a person can check):

- `faster_than_light`: `sol_ms` below the roofline speed of light for the problem on that GPU,
  taking the fastest precision in reach (the problem's supported ones, the reference's and the
  one the run used) and the minimal bytes: physically impossible as measured. The reason names
  the peak (GPU, precision, TFLOP/s and bandwidth) the figure uses, as does `above_headroom`'s.
- `above_headroom`: speedup above `ref_ms / SOL` at the reference's precision, the most any
  solution computing at that precision can gain.
- `lower_precision`: `precision_used` lower than the reference's (bf16 downcast of an fp32 op).
- `no_custom_kernel`: the solution source has no custom kernel (static scan, `solution_scan`).
- `near_identity`: a correct run on a problem whose output is the input to within tolerance,
  so returning the input passes the check (`problem_facts`).
- `outlier`: speedup a robust-z outlier (median / MAD of log speedup) among the correct runs of
  the same problem and GPU across models; only the fast side is flagged.
- `speedup_mismatch`: `speedup` disagrees with `ref_ms / sol_ms` by more than 5%.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from ..catalog.problem import Problem
from .load import GPU_SPLITS

GPU_ORDER = tuple(GPU_SPLITS)
# Bits of each precision, for "lower than" comparisons; tf32 keeps 10 mantissa bits.
PRECISION_BITS = {"fp32": 32, "tf32": 19, "fp16": 16, "bf16": 16, "fp8": 8, "int8": 8, "int4": 4, "fp4": 4}
FLAGS = (
    "faster_than_light",
    "above_headroom",
    "lower_precision",
    "no_custom_kernel",
    "near_identity",
    "outlier",
    "speedup_mismatch",
)
FLAG_COLUMNS = ["run", "model", "gpu", "problem", "problem_id", "speedup", "flag", "reason"]


def split_totals(problems: Iterable[Problem]) -> dict[str, int]:
    """Problems per split, keyed by the runs dataset's GPU name ({"RTX3090": 43, ...})."""
    problems = list(problems)
    return {gpu: sum(split in p.gpus for p in problems) for gpu, split in GPU_SPLITS.items()}


def _split_totals(problems: Iterable[Problem] | None, joined: pd.DataFrame) -> dict[str, int]:
    if problems is not None:
        return split_totals(problems)
    if "split_totals" in joined.attrs:
        return dict(joined.attrs["split_totals"])
    # Without a catalog: the number of distinct problems anyone ran on that GPU.
    return joined.groupby("gpu")["problem_file"].nunique().to_dict()


def _problem_key(joined: pd.DataFrame) -> pd.Series:
    return joined["problem_id"].where(joined["problem_id"].notna(), joined["problem_file"])


FAST_P = (0.0, 1.0, 1.5, 2.0)


def fast_p_column(p: float) -> str:
    """`fast_0`, `fast_1`, `fast_1.5`, `fast_2`: the leaderboard's column for threshold p."""
    return f"fast_{p:g}"


def _best_speedups(good: pd.DataFrame) -> pd.Series:
    """Per problem (of correct runs): the best speedup (NaN when no correct run has one)."""
    return good.groupby("_key")["speedup"].max()


def fast_p(joined: pd.DataFrame, thresholds=FAST_P, problems: Iterable[Problem] | None = None) -> pd.DataFrame:
    """One row per (GPU, model, p): `fast_p`, the share of the split's problems that the model
    solved correctly with a speedup above p (KernelBench's fast_p; fast_0 is the share correct).
    A problem counts once, with its best correct run."""
    totals = _split_totals(problems, joined)
    frame = joined.assign(_key=_problem_key(joined), _correct=joined["correct"].fillna(False).astype(bool))
    rows = []
    for (gpu, model), group in frame.groupby(["gpu", "model"], sort=False):
        best = _best_speedups(group[group["_correct"]])
        total = int(totals.get(gpu, 0))
        for p in thresholds:
            hits = len(best) if p == 0 else int((best > p).sum())
            rows.append({"gpu": gpu, "model": model, "p": float(p), "fast_p": hits / total if total else np.nan})
    return pd.DataFrame(rows, columns=["gpu", "model", "p", "fast_p"])


def leaderboard(joined: pd.DataFrame, problems: Iterable[Problem] | None = None) -> pd.DataFrame:
    """One row per (GPU, model): correct, total, `correct_str` ("33/43"), attempted runs,
    geometric-mean speedup on correct runs, `fast_0` .. `fast_2` (share of the split's problems
    correct with a speedup above p; fast_0 = share correct), the mean and median fraction of
    the speed of light reached by correct runs (`sol_light_ms / sol_ms`: 1 = at the roofline of
    the fastest precision in reach; NaN without roofline figures), total cost and cost per
    correct problem."""
    totals = _split_totals(problems, joined)
    if "sol_light_ms" not in joined.columns and {"flops", "bytes", "supported_precisions"} <= set(joined.columns):
        joined = add_roofline(joined)
    frame = joined.assign(_key=_problem_key(joined), _correct=joined["correct"].fillna(False).astype(bool))
    if "sol_light_ms" in frame.columns:
        frame["_sol_fraction"] = frame["sol_light_ms"] / frame["sol_ms"]
    else:
        frame["_sol_fraction"] = np.nan
    fast_columns = [fast_p_column(p) for p in FAST_P]
    rows = []
    for (gpu, model), group in frame.groupby(["gpu", "model"], sort=False):
        good = group[group["_correct"]]
        correct = int(good["_key"].nunique())
        speedups = good["speedup"].dropna()
        speedups = speedups[speedups > 0]
        best = _best_speedups(good)
        fractions = good["_sol_fraction"].replace([np.inf, -np.inf], np.nan).dropna()
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
            hits = correct if p == 0 else int((best > p).sum())
            row[column] = hits / total if total else np.nan
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
    return wide.loc[order].fillna("-").rename_axis(columns=None)


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


# ---------------------------------------------------------------- roofline columns


def add_roofline(joined: pd.DataFrame) -> pd.DataFrame:
    """Add `sol_light_ms` (fastest precision in reach) and `sol_light_precision` (whose peak it
    uses), `sol_ref_ms` and `sol_ref_precision` (at the reference's precision) and `headroom`
    (= ref_ms / sol_ref_ms) per run; NaN/None where FLOPs/bytes are unknown."""
    from ..hardware.gpus import get_gpu
    from ..hardware.roofline import speed_of_light_ms

    out = joined.copy()
    ref_precision = (
        out["reference_precision"]
        if "reference_precision" in out.columns
        else pd.Series([None] * len(out), index=out.index)
    )
    keys = list(
        zip(
            out["gpu"],
            out["flops"],
            out["bytes"],
            out["supported_precisions"].fillna(""),
            out["precision_used"].fillna(""),
            ref_precision.fillna(""),
        )
    )
    cache: dict[tuple, tuple[float, str | None, float, str | None]] = {}
    for key in keys:
        if key in cache:
            continue
        gpu, flops, nbytes, supported, used, ref = key
        if pd.isna(flops) or pd.isna(nbytes):
            cache[key] = (np.nan, None, np.nan, None)
            continue
        spec = get_gpu(gpu)
        reach = sorted(p for p in {*supported.split(","), used, ref} if p in spec.peak_tflops)
        times = {p: speed_of_light_ms(flops, nbytes, spec, p) for p in reach}
        # Ties (memory-bound problems) name the reference's precision, else the lowest peak.
        best = min(times, key=lambda p: (times[p], p != ref, spec.peak_tflops[p]), default=None)
        ref_p = ref if ref in spec.peak_tflops else "fp32"
        cache[key] = (times[best] if best else np.nan, best, speed_of_light_ms(flops, nbytes, spec, ref_p), ref_p)
    values = [cache[key] for key in keys]
    out["sol_light_ms"] = [v[0] for v in values]
    out["sol_light_precision"] = pd.Series([v[1] for v in values], index=out.index, dtype=object)
    out["sol_ref_ms"] = [v[2] for v in values]
    out["sol_ref_precision"] = pd.Series([v[3] for v in values], index=out.index, dtype=object)
    out["headroom"] = out["ref_ms"] / out["sol_ref_ms"]
    return out


def peak_text(gpu: str, precision: str) -> str:
    """Which peak a speed-of-light figure uses: "the H100 fp16 peak (989 TFLOP/s, 3350 GB/s)"."""
    from ..hardware.gpus import get_gpu

    spec = get_gpu(gpu)
    return (
        f"the {gpu} {precision} peak ({spec.peak_tflops[precision]:g} TFLOP/s dense, "
        f"{spec.memory_bandwidth_gbs:g} GB/s)"
    )


# ---------------------------------------------------------------- flags


def flag_anomalies(
    joined: pd.DataFrame,
    *,
    headroom_factor: float = 1.0,
    z_threshold: float = 3.5,
    min_group: int = 5,
    mismatch_tolerance: float = 0.05,
) -> pd.DataFrame:
    """Every anomaly of every run, one row per (run, flag), with a reason (columns FLAG_COLUMNS).

    `run` is the row label in `joined`. Only correct runs are flagged (an incorrect run has no
    accepted speedup to doubt), except `speedup_mismatch`, which is about the numbers themselves.
    """
    frame = joined if "sol_light_ms" in joined.columns else add_roofline(joined)
    correct = frame["correct"].fillna(False).astype(bool)
    parts: list[pd.DataFrame] = []

    def add(mask: pd.Series, flag: str, reasons: pd.Series | list[str]) -> None:
        mask = mask.fillna(False).astype(bool)
        if not mask.any():
            return
        sub = frame.loc[mask]
        reasons = pd.Series(reasons, index=frame.index)[mask] if not isinstance(reasons, pd.Series) else reasons[mask]
        parts.append(
            pd.DataFrame(
                {
                    "run": sub.index,
                    "model": sub["model"].values,
                    "gpu": sub["gpu"].values,
                    "problem": sub["problem"].values,
                    "problem_id": sub["problem_id"].values,
                    "speedup": sub["speedup"].values,
                    "flag": flag,
                    "reason": reasons.values,
                }
            )
        )

    fast = correct & (frame["sol_ms"] < frame["sol_light_ms"])
    add(
        fast,
        "faster_than_light",
        _fmt(
            frame,
            fast,
            lambda r: (
                f"sol_ms {r.sol_ms:.4g} ms is below the speed of light {r.sol_light_ms:.4g} ms on {r.gpu} "
                f"at {peak_text(r.gpu, r.sol_light_precision)}, the fastest precision in reach "
                f"({r.sol_light_ms / r.sol_ms:.1f}x faster than physically possible)"
            ),
        ),
    )

    limit = frame["headroom"] * headroom_factor
    above = correct & (frame["speedup"] > limit)
    add(
        above,
        "above_headroom",
        _fmt(
            frame,
            above,
            lambda r: (
                f"speedup {r.speedup:.3g}x exceeds the roofline headroom {r.headroom:.3g}x "
                f"(ref {r.ref_ms:.4g} ms / speed of light {r.sol_ref_ms:.4g} ms at "
                f"{peak_text(r.gpu, r.sol_ref_precision)}, the reference's precision)"
            ),
        ),
    )

    if "reference_precision" in frame.columns:
        used_bits = frame["precision_used"].map(PRECISION_BITS)
        ref_bits = frame["reference_precision"].map(PRECISION_BITS)
        lower = correct & (used_bits < ref_bits)
        add(
            lower,
            "lower_precision",
            _fmt(
                frame,
                lower,
                lambda r: f"precision_used {r.precision_used} is lower than the reference's {r.reference_precision}",
            ),
        )

    if "solution_source" in frame.columns:
        from .solution_scan import scan_source

        has_source = correct & frame["solution_source"].notna()
        scans = {i: scan_source(frame.at[i, "solution_source"]) for i in frame.index[has_source]}
        no_kernel = pd.Series(False, index=frame.index)
        reasons = pd.Series("", index=frame.index, dtype=object)
        for i, scan in scans.items():
            if not scan.has_custom_kernel:
                no_kernel[i] = True
                reasons[i] = scan.reason
        add(no_kernel, "no_custom_kernel", reasons)

    if "near_identity" in frame.columns:
        ident = correct & frame["near_identity"].fillna(False).astype(bool)
        add(
            ident,
            "near_identity",
            _fmt(
                frame,
                ident,
                lambda r: (
                    f"the problem's output equals its input to within tolerance (max|ref-x| "
                    f"{r.identity_max_abs:.2g} < {r.identity_tolerance:.2g} at {r.identity_sizes} sizes): "
                    "returning the input passes the check"
                ),
            ),
        )

    z = robust_z(frame, min_group=min_group)
    out = correct & (z > z_threshold)
    add(
        out,
        "outlier",
        _fmt(
            frame.assign(robust_z=z),
            out,
            lambda r: (
                f"speedup {r.speedup:.3g}x is a robust-z {r.robust_z:.1f} outlier among the correct runs on "
                f"{r.problem} / {r.gpu}"
            ),
        ),
    )

    implied = frame["ref_ms"] / frame["sol_ms"]
    mismatch = (frame["speedup"] - implied).abs() > mismatch_tolerance * implied
    add(
        mismatch,
        "speedup_mismatch",
        _fmt(frame, mismatch, lambda r: f"speedup {r.speedup:.4g}x but ref_ms / sol_ms = {r.ref_ms / r.sol_ms:.4g}x"),
    )

    if not parts:
        return pd.DataFrame(columns=FLAG_COLUMNS)
    flags = pd.concat(parts, ignore_index=True)
    flags["flag"] = pd.Categorical(flags["flag"], categories=FLAGS)
    return flags.sort_values(["run", "flag"]).reset_index(drop=True)


def _fmt(frame: pd.DataFrame, mask: pd.Series, text) -> pd.Series:
    reasons = pd.Series("", index=frame.index, dtype=object)
    for row in frame.loc[mask.fillna(False).astype(bool)].itertuples():
        reasons[row.Index] = text(row)
    return reasons


def robust_z(frame: pd.DataFrame, min_group: int = 5) -> pd.Series:
    """Robust z-score of log speedup within (problem, GPU) over correct runs:
    0.6745 * (x - median) / MAD (Iglewicz-Hoaglin); NaN for groups smaller than `min_group`
    or with no spread."""
    good = frame["correct"].fillna(False).astype(bool) & (frame["speedup"] > 0)
    logs = np.log(frame["speedup"].where(good))
    keys = [_problem_key(frame), frame["gpu"]]
    grouped = logs.groupby(keys)
    median = grouped.transform("median")
    mad = (logs - median).abs().groupby(keys).transform("median")
    size = grouped.transform("count")
    z = 0.6745 * (logs - median) / mad.where(mad > 0)
    return z.where(size >= min_group)


def flagged_runs(joined: pd.DataFrame, flags: pd.DataFrame) -> pd.DataFrame:
    """The runs with at least one flag: their key columns plus `flags` and `reasons` (joined)."""
    if flags.empty:
        return pd.DataFrame(columns=["model", "gpu", "problem", "speedup", "flags", "reasons"])
    per_run = flags.groupby("run", observed=True).agg(
        flags=("flag", lambda s: ", ".join(map(str, s))),
        reasons=("reason", lambda s: " | ".join(s)),
        n_flags=("flag", "size"),
    )
    keep = [
        c
        for c in ("model", "gpu", "problem", "problem_id", "speedup", "ref_ms", "sol_ms", "precision_used")
        if c in joined.columns
    ]
    out = joined.loc[per_run.index, keep].join(per_run)
    return out.sort_values(["n_flags", "speedup"], ascending=[False, False])


def analyze_runs(
    source=None, *, problems=None, solutions: bool = True, facts: bool = True, **flag_options
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Load -> join -> roofline -> flags in one call: (joined frame with roofline columns, flags).

    `source`/`problems` as for `runs.load_runs`. Solutions are read where the source has them.
    `facts=False` skips the per-problem CPU facts (reference precision and near-identity; the
    first computation over the full catalog takes about a minute, then it is cached), and with
    them the `lower_precision` and `near_identity` flags.
    """
    import warnings

    from ..catalog.problem import discover
    from .facts import facts_table
    from .load import join_runs, load_runs

    catalog = discover(problems) if problems is None or isinstance(problems, (str, Path)) else list(problems)
    runs = load_runs(source, problems=catalog, solutions=solutions)
    table = facts_table(catalog) if facts else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unmatched rows are reported by the callers
        joined = join_runs(runs, catalog, table)
    joined = add_roofline(joined)
    joined.attrs["split_totals"] = split_totals(catalog)
    return joined, flag_anomalies(joined, **flag_options)
