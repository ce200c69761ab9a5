"""Where the gate resolves a call, by mode: a time below the floor is never reported as a number.

Without MPS the GPU time-slices between the supervisor's context and the solution's, so every
gated window holds a context switch (about 150 us on the H200) whose jitter is as wide as a small
kernel. The echo's window subtracts the switch's median, not its spread against the call. On the
H200 (../shared/measurements/h200-session6.md, main at 69183c9), scored against the same solution
timed outside: every evaluation from 0.14 ms up within 2.5%; 0.10 ms at -7%, 67 us at +5%, 10-30
us between -57% and +20%, and 10 us GELUs under their roofline (`impossible_time`). The plain
gate's floor is set above the last wrong figure: PLAIN_FLOOR_S.

Under MPS the processes share one server context, there is no switch in the window (the echo's
window is 8-15 us), and the floor is set by the null-call ladder (`benchmarks/bench/
bench_small_kernels_gpu.py`): trusted kernels of known duration timed exactly as a solution is.
MPS_FLOOR_S is the shortest rung the ladder resolves within 0.5 us.

Below the floor the verdict stands (the calls were judged), but `sol_ms` and `speedup` read null
and the record names `timing_unresolved` and why (`scoring.fill_timing`); physics is not judged
on such a figure, so an honest small kernel is never `impossible_time` for the gate's noise.

Without MPS the prep witness cannot tell work from waiting either: with an honest softmax's
call armed on two streams, the timer's write of the inputs took 1.56 ms against 0.149 before the
echo's, just as work run before the window would make it (the likely cause, the solution's
context keeping its time slice, is not measured). So there a prep over its bound leaves the time
unresolved (`time_sliced_prep`) rather than failing the solution; under MPS, where the contexts
share the SMs and a held call runs nothing, it still fails (`work_before_window`). Either way no
figure is reported.
"""

from __future__ import annotations

UNRESOLVED = "timing_unresolved"
PLAIN_FLOOR_S = 150e-6  # without MPS: the 0.10 ms gemm_bias_relu scored -7%, 0.14 ms and up within 2.5%
MPS_FLOOR_S = 2e-6  # under MPS: the ladder's shortest rung (2 us); raised if a rung is not resolved


def floor_s(mps: bool) -> float:
    """The shortest call the gate resolves in this mode."""
    return MPS_FLOOR_S if mps else PLAIN_FLOOR_S


def unresolved(median_s: float, mps: bool, what: str = "the solution's calls") -> str:
    """Why a median of `median_s` seconds is not reported as a time in this mode, or ''."""
    floor = floor_s(mps)
    if median_s >= floor or mps and not median_s > 0:  # under MPS nothing honest reads <= 0: physics judges it
        return ""
    hint = (
        "run under MPS (the default; remove --no-mps or KBV3_MPS=0) to time calls this small"
        if not mps
        else "the gate does not resolve calls this small"
    )
    return (
        f"{UNRESOLVED}: {what} measured {median_s * 1e6:.1f} us, under the {floor * 1e6:.0f} us the gate resolves "
        f"{'without' if not mps else 'under'} MPS (docs/timing.md); {hint}"
    )


def time_sliced_prep(solution_ms: float, echo_ms: float) -> str:
    """Why, without MPS, a slow write of the inputs before the solution's calls leaves its time
    unresolved (module docstring)."""
    return (
        f"{UNRESOLVED}: writing the inputs and clearing the L2 before the solution's calls took "
        f"{solution_ms:.4g} ms against {echo_ms:.4g} ms before the echo's; without MPS the GPU "
        "time-slices contexts, and a call armed on several streams holds its context's slice just as "
        "work run before the window would (docs/timing.md); run under MPS (the default; remove --no-mps "
        "or KBV3_MPS=0) to time it"
    )
