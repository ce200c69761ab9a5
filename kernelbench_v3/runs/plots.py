"""Figures of joined runs (matplotlib, Agg backend): speedup vs roofline headroom, speedup by
level, fast_p curves per model, flags per model.

Each function takes the frame of `speed_of_light.add_roofline` / `load.join_runs` (and optionally the
flags of `anomalies.flag_anomalies`) and returns a matplotlib Figure; nothing is shown or saved
here. The Agg backend is selected only when no backend was chosen yet, so notebooks keep theirs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .leaderboard import FAST_P, GPU_ORDER, fast_p, level_group


def _pyplot():
    import os
    import sys

    import matplotlib

    if "matplotlib.pyplot" not in sys.modules and not os.environ.get("MPLBACKEND") and "ipykernel" not in sys.modules:
        matplotlib.use("Agg")  # headless (CLI, tests, CI); inside Jupyter the inline backend wins
    import matplotlib.pyplot as plt

    return plt


def speedup_vs_headroom(joined: pd.DataFrame, flags: pd.DataFrame | None = None):
    """One panel per GPU: each correct run's speedup (y) against its roofline headroom (x),
    log-log, with the y = x line above which a speedup is impossible at the reference's
    precision. Flagged runs are drawn in red."""
    plt = _pyplot()
    good = joined[joined["correct"].fillna(False).astype(bool) & (joined["speedup"] > 0) & (joined["headroom"] > 0)]
    gpus = [g for g in GPU_ORDER if g in set(joined["gpu"])] or list(GPU_ORDER)
    fig, axes = plt.subplots(1, len(gpus), figsize=(5 * len(gpus), 4.5), squeeze=False, sharey=True)
    flagged = set(flags["run"]) if flags is not None and len(flags) else set()
    values = pd.concat([good["speedup"], good["headroom"]])
    lo = float(values.min()) / 2 if len(values) else 0.1
    hi = float(values.max()) * 2 if len(values) else 100.0
    for ax, gpu in zip(axes[0], gpus):
        sub = good[good["gpu"] == gpu]
        is_flagged = sub.index.isin(list(flagged))
        ax.scatter(
            sub.loc[~is_flagged, "headroom"],
            sub.loc[~is_flagged, "speedup"],
            s=22,
            alpha=0.7,
            color="tab:blue",
            label="correct run",
        )
        ax.scatter(
            sub.loc[is_flagged, "headroom"],
            sub.loc[is_flagged, "speedup"],
            s=40,
            alpha=0.9,
            color="tab:red",
            marker="D",
            label="flagged run",
        )
        ax.plot([lo, hi], [lo, hi], color="black", lw=1, ls="--", label="speedup = headroom")
        ax.axhline(1.0, color="grey", lw=0.8, ls=":")
        ax.fill_between([lo, hi], [lo, hi], [hi, hi], color="tab:red", alpha=0.06)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_title(f"{gpu}: {len(sub)} correct runs with a roofline, {int(is_flagged.sum())} flagged")
        ax.set_xlabel("roofline headroom (ref_ms / speed of light)")
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel("measured speedup")
    axes[0][-1].legend(loc="lower right", fontsize=8)
    fig.suptitle("Speedup against what the roofline allows (shaded: impossible at the reference's precision)")
    fig.tight_layout()
    return fig


def speedup_by_level(joined: pd.DataFrame):
    """Box plots of log speedup per level group, one panel per GPU, correct runs only."""
    plt = _pyplot()
    good = joined[joined["correct"].fillna(False).astype(bool) & (joined["speedup"] > 0)]
    good = good.assign(level_group=level_group(good))
    gpus = [g for g in GPU_ORDER if g in set(joined["gpu"])] or list(GPU_ORDER)
    fig, axes = plt.subplots(1, len(gpus), figsize=(5 * len(gpus), 4.5), squeeze=False, sharey=True)
    for ax, gpu in zip(axes[0], gpus):
        sub = good[good["gpu"] == gpu]
        groups = sorted(sub["level_group"].unique())
        data = [sub.loc[sub["level_group"] == g, "speedup"].to_numpy() for g in groups]
        if data:
            ax.boxplot(data, showfliers=False)
            ax.set_xticks(range(1, len(groups) + 1), groups, rotation=30, ha="right")
            for i, values in enumerate(data, start=1):
                jitter = np.random.default_rng(i).uniform(-0.15, 0.15, len(values))
                ax.scatter(np.full(len(values), i) + jitter, values, s=12, alpha=0.6, color="tab:blue")
        ax.axhline(1.0, color="grey", lw=0.8, ls=":")
        ax.set_yscale("log")
        ax.set_title(f"{gpu}")
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].set_ylabel("speedup over the baseline (correct runs)")
    fig.suptitle("Speedup distribution by level")
    fig.tight_layout()
    return fig


def flags_by_model(flags: pd.DataFrame):
    """Stacked bars: how many runs of each model carry each flag."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    if flags.empty:
        ax.text(0.5, 0.5, "no flagged runs", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    counts = flags.groupby(["model", "flag"], observed=True).size().unstack(fill_value=0)
    counts = counts.loc[counts.sum(axis=1).sort_values(ascending=False).index]
    bottom = np.zeros(len(counts))
    for flag in counts.columns:
        ax.bar(counts.index, counts[flag], bottom=bottom, label=str(flag))
        bottom += counts[flag].to_numpy()
    ax.set_ylabel("flagged runs")
    ax.set_title("Anomaly flags per model")
    ax.tick_params(axis="x", rotation=30)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def model_colours(models) -> dict[str, tuple]:
    """One colour per model, the same in every panel and figure (models in sorted order)."""
    plt = _pyplot()
    names = sorted({str(m) for m in models})
    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    return {name: cmap(i % cmap.N) for i, name in enumerate(names)}


def fast_p_curves(joined: pd.DataFrame, thresholds=None):
    """One panel per GPU: each model's fast_p (share of the split's problems correct with a
    speedup above p) against the threshold p, from 0 (the share correct) up; the leaderboard's
    thresholds (0, 1, 1.5, 2) are marked. A model has one colour in every panel, and one legend
    (beside the panels) names every model of any panel. A model with no speedup at all (timed
    on the CPU) is one point at p = 0 marked n/a, never a curve that falls to 0."""
    plt = _pyplot()
    from matplotlib.lines import Line2D

    if thresholds is None:
        top = float(joined["speedup"].max()) if joined["speedup"].notna().any() else 4.0
        top = top if np.isfinite(top) else 4.0
        thresholds = np.unique(np.concatenate([np.linspace(0, max(4.0, min(top, 20.0)), 81), FAST_P]))
    curves = fast_p(joined, thresholds)
    gpus = [g for g in GPU_ORDER if g in set(curves["gpu"])] or list(GPU_ORDER)
    colours = model_colours(curves["model"])
    fig, axes = plt.subplots(1, len(gpus), figsize=(5 * len(gpus) + 2, 4.2), squeeze=False, sharey=True)
    for ax, gpu in zip(axes[0], gpus):
        sub = curves[curves["gpu"] == gpu]
        for model, line in sub.groupby("model", sort=True):
            colour = colours[str(model)]
            if line.loc[line["p"] > 0, "fast_p"].isna().all():
                # No correct run of this model has a speedup (CPU timing, no baseline): only
                # fast_0 exists. A curve falling to 0 would read as "measured, never faster".
                share = line.loc[line["p"] == 0, "fast_p"]
                ax.plot([0.0], share.iloc[:1], marker="o", color=colour, label=str(model))
                ax.annotate(
                    f"{model}: fast_0 only; no speedup (n/a)",
                    (0.0, float(share.iloc[0]) if len(share) else 0.0),
                    xytext=(8, 0),
                    textcoords="offset points",
                    fontsize=8,
                    va="center",
                    color=colour,
                )
                continue
            ax.step(line["p"], line["fast_p"], where="post", color=colour, label=str(model))
        for p in FAST_P:
            ax.axvline(p, color="grey", lw=0.6, ls=":")
        ax.set_title(f"{gpu}: fast_p per model")
        ax.set_xlabel("speedup threshold p")
        ax.set_ylim(0, None)
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("share of the split's problems correct and faster than p")
    handles = [Line2D([0], [0], color=colour, lw=2, label=model) for model, colour in colours.items()]
    fig.tight_layout(rect=(0, 0, 1 - 1.6 / (5 * len(gpus) + 2), 1))
    fig.legend(handles=handles, loc="center right", fontsize=8, title="model")
    return fig
