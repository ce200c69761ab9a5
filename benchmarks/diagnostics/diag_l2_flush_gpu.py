"""Which L2 flush gives small kernels the most repeatable time: write, read, or both.

The evaluator flushes L2 before every timed call. Zeroing a buffer (what it did, like Triton's
do_bench) leaves L2 full of dirty lines, and the timed kernel then pays for writing them back;
summing a buffer leaves clean lines. For the bundled honest solutions of a few h100-split
problems, this script times each with `cuda_timing.time_cuda` under each variant of `VARIANTS`
(flush modes; in-process, rotating 8 input sets, no fresh inputs) and appends one
JSON line per (problem, variant) to --out. Run it in several fresh processes, then `--report` prints, per problem
and mode, the median per process, the spread (max-min)/min across processes and the mean CV.

    for r in 0 1 2 3 4; do python benchmarks/diagnostics/diag_l2_flush_gpu.py --out flush.jsonl --run $r; done
    python benchmarks/diagnostics/diag_l2_flush_gpu.py --report flush.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from diag_common import add_run_arguments, read_jsonl, rotated, run_or_report  # noqa: E402

from kernelbench_v3.catalog.materialize import import_file  # noqa: E402

PROBLEMS = ["level1/23_Softmax", "level1/26_GELU_", "level2/86_Matmul_Divide_GELU"]
# Variant name -> TimingPlan options (commit d00457f also had "read+hold8", held outputs). The
# first three are one flush pass, as when l2_flush_gpu.md was measured; "read2" is today's default.
VARIANTS = {
    "write": {"l2_flush": "write", "l2_flush_passes": 1},
    "read": {"l2_flush": "read", "l2_flush_passes": 1},
    "write_read": {"l2_flush": "write_read", "l2_flush_passes": 1},
    "read2": {"l2_flush": "read", "l2_flush_passes": 2},
}


def measure(run: int, seconds: float, variants: list[str], problems: list[str]) -> list[dict]:
    import torch

    from kernelbench_v3.evaluate import cuda_timing, timing

    modes = rotated(variants, run)
    rows = []
    for problem_id in problems:
        problem = import_file(ROOT / "problems" / f"{problem_id}.py")
        solution = import_file(ROOT / "examples" / "solutions" / f"{problem_id}.py")
        torch.manual_seed(0)
        model = solution.Model(*problem.get_init_inputs()).cuda()
        sets = []
        for seed in range(8):
            torch.manual_seed(seed)
            sets.append([x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()])
        with torch.no_grad():
            for mode in modes:
                plan = timing.TimingPlan(max_seconds=seconds, **VARIANTS[mode])
                stats, _ = cuda_timing.time_cuda(lambda a: model(*a), sets, plan)  # noqa: B023 (called here)
                row = {
                    "run": run,
                    "problem": problem_id,
                    "mode": mode,
                    "median_ms": stats.median_ms,
                    "p10_ms": stats.p10_ms,
                    "p90_ms": stats.p90_ms,
                    "cv": stats.cv,
                    "reps": stats.reps,
                    "median_ci_rel": stats.details.get("median_ci_rel"),
                    "sm_clock_mhz": [stats.details.get("sm_clock_mhz_before"), stats.details.get("sm_clock_mhz_after")],
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def report(path: Path) -> str:
    rows = read_jsonl(path)
    lines = [
        "| problem | flush | runs | median ms per run | spread (max-min)/min | mean CV | mean p90/p10 |",
        "|---|---|---|---|---|---|---|",
    ]
    for problem in dict.fromkeys(r["problem"] for r in rows):
        for mode in dict.fromkeys(r["mode"] for r in rows):
            picked = [r for r in rows if r["problem"] == problem and r["mode"] == mode]
            if not picked:
                continue
            medians = [r["median_ms"] for r in picked]
            spread = (max(medians) - min(medians)) / min(medians)
            lines.append(
                f"| {problem} | {mode} | {len(picked)} | {', '.join(f'{m:.4g}' for m in medians)} | "
                f"{spread:.2%} | {statistics.fmean(r['cv'] for r in picked):.3f} | "
                f"{statistics.fmean(r['p90_ms'] / r['p10_ms'] for r in picked):.3f} |"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(parser, VARIANTS, default="write,read,write_read")
    parser.add_argument("--seconds", type=float, default=3.0, help="timing budget per (problem, mode)")
    parser.add_argument("--problems", default=",".join(PROBLEMS), help="comma list of problem ids")
    args = parser.parse_args()
    return run_or_report(
        parser,
        args,
        report,
        known=VARIANTS,
        measure=lambda variants: measure(args.run, args.seconds, variants, args.problems.split(",")),
    )


if __name__ == "__main__":
    sys.exit(main())
