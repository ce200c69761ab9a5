"""Speed-of-light columns for joined runs: the roofline time of each run's problem on its GPU at the
fastest precision in reach and at the reference's precision, the headroom they leave, and the
text that names which peak a figure uses."""

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


def peak_text(gpu: str, precision: str) -> str:
    """Which peak a speed-of-light figure uses: "the H100 fp16 peak (989 TFLOP/s, 3350 GB/s)"."""
    from ..hardware.gpus import get_gpu

    spec = get_gpu(gpu)
    return (
        f"the {gpu} {precision} peak ({spec.peak_tflops[precision]:g} TFLOP/s dense, "
        f"{spec.memory_bandwidth_gbs:g} GB/s)"
    )
