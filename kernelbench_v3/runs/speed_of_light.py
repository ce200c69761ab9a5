"""Speed-of-light columns for joined runs: the roofline time of each run's problem on its GPU at the
fastest precision in reach and at the reference's precision, the headroom they leave, the
fraction of the speed of light a run reached (one definition for the report and the
leaderboard), and the text that names which peak a figure uses."""

from __future__ import annotations

import numpy as np
import pandas as pd


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


def timed_on_gpu(frame: pd.DataFrame) -> pd.Series:
    """Per run: True unless its time is known to be no performance figure (`timing_meaningful`
    False: a CPU time through the Triton interpreter). Published runs, which have no such
    column, were timed on their GPU."""
    if "timing_meaningful" not in frame.columns:
        return pd.Series(True, index=frame.index)
    return frame["timing_meaningful"].map(lambda v: True if v is None or pd.isna(v) else bool(v)).astype(bool)


def sol_fraction(frame: pd.DataFrame) -> pd.Series:
    """Per run, the fraction of the speed of light reached (1 = at the roofline; above 1 is
    faster than physically possible): the record's own `sol_fraction` where it has one (an
    evaluator record, computed at the sizes it ran), else `sol_light_ms / sol_ms` (a published
    run, at the default sizes); NaN where the time is no performance figure or either is
    unknown. `kbv3 report`'s SOL column and the leaderboard's mean/median both read this."""
    own = pd.to_numeric(frame["sol_fraction"], errors="coerce") if "sol_fraction" in frame.columns else None
    if "sol_light_ms" in frame.columns and "sol_ms" in frame.columns:
        light = pd.to_numeric(frame["sol_light_ms"], errors="coerce") / pd.to_numeric(frame["sol_ms"], errors="coerce")
    else:
        light = pd.Series(np.nan, index=frame.index)
    fraction = light if own is None else own.where(own.notna(), light)
    fraction = fraction.astype(float).replace([np.inf, -np.inf], np.nan)
    return fraction.where(timed_on_gpu(frame))


def peak_text(gpu: str, precision: str) -> str:
    """Which peak a speed-of-light figure uses: "the H100 fp16 peak (989 TFLOP/s, 3350 GB/s)"."""
    from ..hardware.gpus import get_gpu

    spec = get_gpu(gpu)
    return (
        f"the {gpu} {precision} peak ({spec.peak_tflops[precision]:g} TFLOP/s dense, "
        f"{spec.memory_bandwidth_gbs:g} GB/s)"
    )
