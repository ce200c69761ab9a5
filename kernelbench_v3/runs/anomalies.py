"""Anomaly flags of joined runs, each with a reason a person can check, and `analyze_runs`,
which loads, joins and flags in one call.

Input is the frame of `runs.load.join_runs` (optionally with `runs.facts.facts_table` merged in).

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

from pathlib import Path

import numpy as np
import pandas as pd

from .leaderboard import problem_key, split_totals
from .speed_of_light import add_roofline, peak_text

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
    keys = [problem_key(frame), frame["gpu"]]
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
