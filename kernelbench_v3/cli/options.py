"""The evaluator's options on the command line: declared once for `eval` and `eval-batch`, read
back into one `EvalOptions`."""

from __future__ import annotations

import argparse

from ..vocab import REQUESTABLE_KERNEL_RULES, TOLERANCE_MODES
from .args import positive_seconds, seeds
from .flags import add_retry_failed_baseline, add_timing_seconds


def add_eval_options(p: argparse.ArgumentParser) -> None:
    """Declare the judging options on `p`."""
    p.add_argument(
        "--tolerance",
        choices=TOLERANCE_MODES,
        default="v3",
        help="v3: allclose at 1e-2 (comparable with the runs dataset); published: the published "
        "per-precision max-error rule; strict: calibrated from the reference's float64 error",
    )
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=None,
        help="seconds per step (start, import, each case, each timing window, the CUDA graph capture, finishing) "
        "and per reference/baseline process, so a hang anywhere ends within it "
        "(default: each step's limit derived from the problem, so a hang fails within a minute)",
    )
    p.add_argument(
        "--relax-kernel-check",
        action="store_true",
        help="let a solution without a custom kernel pass, e.g. references as solutions (the record says so)",
    )
    p.add_argument(
        "--kernel-rule",
        choices=REQUESTABLE_KERNEL_RULES,
        default="strict",
        help="strict (default): own kernels ran, no library GEMM/conv/attention, own kernels "
        "do the main work; v3: the published rule only (an own kernel ran)",
    )
    p.add_argument(
        "--no-source-scan",
        action="store_true",
        help="skip the static tamper scan (to study the other defences; the record says so)",
    )
    p.add_argument("--seeds", type=seeds, help="correctness seeds, e.g. 42,123 (default: 42,123,456,789,1337)")
    p.add_argument(
        "--no-other-shape", action="store_true", help="check correctness at the given shapes only (no second shape)"
    )
    p.add_argument("--no-timing", action="store_true", help="correctness only")
    add_timing_seconds(p)
    p.add_argument(
        "--baseline",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="time the reference (eager and torch.compile) for the speedup (default: on CUDA only; a CPU "
        "time gives no speedup, so --baseline there only records timing_details.cpu_time_ratio); "
        "--no-baseline: correctness screening, no ref_ms or speedup",
    )
    add_retry_failed_baseline(p)


def eval_options_from(args: argparse.Namespace):
    """The EvalOptions the options of `add_eval_options` describe."""
    from ..evaluate import EvalOptions

    return EvalOptions(
        tolerance=args.tolerance,
        require_custom_kernel=not args.relax_kernel_check,
        kernel_rule=args.kernel_rule,
        scan_source=not args.no_source_scan,
        seeds=args.seeds or EvalOptions().seeds,
        time_solution=not args.no_timing,
        baseline=args.baseline,
        other_shape=not args.no_other_shape,
        timing_seconds=args.timing_seconds,
        retry_failed_baseline=args.retry_failed_baseline,
        timeout_s=args.timeout,
    )
