"""The witnesses: what the timer's own work around the windows says about the caller (pure arithmetic).

The caller's host side is stopped from ARMED until after its window, so work of its own can only
run on the GPU: a kernel it left running before it armed (watching the inputs, hogging the
device) or work its gated call left running past DONE. The timer's own GPU work shows both:

- `gap`: a flush right after the caller's window must cost what one right after the echo's does,
  give or take writing back the call's output (at most a full L2) and noise; otherwise its work
  went on after DONE (`GAP_WORK`). Under MPS the copy at DONE already judges such work
  (`snapshot`), and the margin stays wide; without MPS this check is all there is, so its margin
  is what the measured noise needs (`GAP_SLACK_PLAIN`). In either mode the flush may also run
  late by `GAP_CALL_SHARE` of the caller's median call: work hidden past DONE then buys at most
  that share of the score, under the 3% fidelity bound, and heavy honest models (whose next
  flush runs about 1% of their call late on an H100) pass.
- `prep`: writing the call's inputs and clearing the L2, right before the caller's window, must
  cost what the same write and flush cost right before the echo's; otherwise something ran
  beside them (`WORK_BEFORE_WINDOW`).
- `busy`: the flush after the echo's window must cost about what it cost on an idle device
  (`DeviceWork.idle_flush_s`, timed before any solution process existed); a device busy with
  somebody's kernels the whole time slows both sides alike, which the two checks above cannot
  see. Timing stops at once and fails (`GPU_BUSY`).

Each check returns its findings for the record and whether it failed; the verdict turns a
failure into `timing_gap`.
"""

from __future__ import annotations

from typing import Any

from .device_work import DeviceWork
from .stats import quantile

GAP_WORK = "gap_work"
WORK_BEFORE_WINDOW = "work_before_window"
GPU_BUSY = "gpu_busy"
GAP_SLACK = 0.5  # under MPS a flush after the caller may take this much longer than after the echo ...
GAP_SLACK_S = 50e-6  # ... plus this, plus writing back the call's output (at most a full L2): the
# 500 us rung of the null-call ladder, a trusted kernel, read up to +26 us on an H100
# Without MPS: honest medians read -1.8 to +8.6 us over the echo's (about 0.18-0.27 ms), on the
# H200 and an H100, GEMMs and a 268 MB LayerNorm among them (benchmarks/results/calls_gpu.jsonl,
# gate_spin_gpu.jsonl, small_kernels_hold_gpu.jsonl), where a GEMM that wrote DONE 0.12 ms early
# read about +0.12 ms and passed the MPS margin. So: 15% + 30 us + the write-back at the idle
# flush's own rate.
GAP_SLACK_PLAIN = 0.15
GAP_SLACK_PLAIN_S = 30e-6
# Honest multi-kernel models of 27-31 ms (level3/44, level4/3, level4/8 of the h100 split) read
# 0.23-0.26 ms over the echo's flush on an H100 (by events too, so the device's, not a delayed
# timer; benchmarks/results/throughput_gpu_batch54.md): 0.8-1.0% of their calls. 2% of the
# call is allowed beside the margins above: hidden work worth that much moves a score by at most
# 2%, inside the 3% fidelity bound.
GAP_CALL_SHARE = 0.02
PREP_SLACK = 0.5  # the write and flush before the caller's window, against the echo's ...
PREP_SLACK_S = 50e-6  # ... plus this
BUSY_FACTOR = 4.0  # the flush after the echo's window against an idle device's ...
BUSY_SLACK_S = 2e-3  # ... plus this (it includes a context switch back to the timer)


def _median(values: list[float]) -> float:
    return quantile(values, 0.5)


def gap(
    after: list[float],
    after_echo: list[float],
    out_nbytes: int,
    work: DeviceWork,
    under_mps: bool = True,
    by_events: tuple[list[float], list[float]] = ([], []),
    call_s: float = 0.0,
) -> tuple[dict[str, Any], bool]:
    """The flush after the caller's window against the flush after the echo's, by the host's
    clock (the check); `call_s`, the caller's median net time, allows GAP_CALL_SHARE of it.
    `by_events`: the same flushes' own seconds on the GPU (caller's, echo's), reported beside
    them and never judged: where the host's figures part from these, the timer's thread was
    delayed, not the device."""
    echo = _median(after_echo)
    caller = _median(after)
    written = min(out_nbytes, work.l2_bytes)
    if under_mps or work.idle_flush_s <= 0:
        writeback_s = echo * written / max(work.l2_bytes * 2, 1)  # the flush reads 2x L2
        bound = echo * (1 + GAP_SLACK) + GAP_SLACK_S + writeback_s
    else:  # the idle device's flush read 2x L2 in idle_flush_s: write-back at that rate
        writeback_s = work.idle_flush_s * written / max(work.l2_bytes * 2, 1)
        bound = echo * (1 + GAP_SLACK_PLAIN) + GAP_SLACK_PLAIN_S + writeback_s
    bound = max(bound, echo + GAP_CALL_SHARE * max(call_s, 0.0))
    found = {"flush_after_echo_ms": echo * 1e3, "flush_after_solution_ms": caller * 1e3, "bound_ms": bound * 1e3}
    if by_events[0] and by_events[1]:
        found["gpu_flush_after_echo_ms"] = _median(by_events[1]) * 1e3
        found["gpu_flush_after_solution_ms"] = _median(by_events[0]) * 1e3
    return found, caller > bound


def prep(preps: list[float], echo_preps: list[float]) -> tuple[dict[str, Any], bool]:
    echo = _median(echo_preps)
    caller = _median(preps)
    bound = echo * (1 + PREP_SLACK) + PREP_SLACK_S
    found = {"solution_ms": caller * 1e3, "echo_ms": echo * 1e3, "bound_ms": bound * 1e3}
    return found, caller > bound


def busy(after_echo: list[float], work: DeviceWork) -> str:
    """Why the device looks busy with work that is not the timer's, or ''."""
    idle = work.idle_flush_s
    if not work.cuda or idle <= 0 or not after_echo:
        return ""
    seen = _median(after_echo)
    bound = idle * BUSY_FACTOR + BUSY_SLACK_S
    if seen <= bound:
        return ""
    return (
        f"the GPU was busy while the solution should have been idle: a flush of the timer's took "
        f"{seen * 1e3:.3g} ms against {idle * 1e3:.3g} ms on the idle device (at most {bound * 1e3:.3g}); "
        "a kernel of the solution's kept running between its calls"
    )
