"""Physics as a floor under every scored time.

No honest call takes no time, and none beats the roofline: the problem's FLOPs at the GPU's peak
rate and its fewest bytes at the GPU's memory bandwidth (`hardware.roofline.floor_ms`), on the GPU
that ran it, not the split's. The peak is that of the fastest arithmetic the problem's precision
allows (TF32 tensor cores for an fp32 problem), so an honest 3xTF32 GEMM is never impossible. A scored time at or under zero, or under that speed of light less
`MARGIN` (the roofline's own error: datasheet peaks are rounded up, and an output smaller than
the L2 can still sit in it when the call ends), is never scored (`impossible_time`).
"""

from __future__ import annotations

MARGIN = 0.2  # a time may be this share under the speed of light before it is impossible


def speed_of_light_ms(problem_id: str, gpu: str, precision: str) -> float | None:
    """The roofline time of the problem at default sizes on `gpu`, at the fastest arithmetic its
    precision allows (None when unknown)."""
    from ....hardware import gpus, roofline

    try:  # a problem outside the table, a GPU or precision without a figure: no speed of light
        flops, nbytes = roofline.DEFAULT_ROOFLINE[problem_id]
        return float(roofline.floor_ms(flops, nbytes, gpus.get_gpu(gpu), precision))
    except (KeyError, ValueError):
        return None


def impossible(sol_ms: float, problem_id: str, ran_on: str, precision: str, default_sizes: bool) -> str:
    """Why `sol_ms` cannot be a real time, or ''."""
    if not sol_ms > 0:  # NaN included
        return f"the scored time {sol_ms:.4g} ms is not positive"
    if not default_sizes:
        return ""
    light = speed_of_light_ms(problem_id, ran_on, precision)
    if light is None or sol_ms >= light * (1 - MARGIN):
        return ""
    return (
        f"the scored time {sol_ms:.4g} ms is under {ran_on}'s speed of light for this problem "
        f"({light:.4g} ms, less {MARGIN:.0%} for the roofline's own error)"
    )
