"""A short CUDA smoke run of the evaluator: a few honest and cheating solutions, one table.

Much cheaper than bench_evaluator_gpu.py (no full baseline table, no fidelity runs): it checks
that the CUDA paths (reference-side profiling, fresh-input timing, custom-kernel time share)
work end to end. Prints a markdown table and writes it to --out.

    python benchmarks/diagnostics/smoke_evaluator_gpu.py --out /tmp/smoke_evaluator_gpu.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kernelbench_v3.evaluate import EvalRequest, evaluate  # noqa: E402

CASES = [
    ("level1/23_Softmax", "examples/solutions/level1/23_Softmax.py"),
    ("level1/23_Softmax", "tests/solutions/cheats/content_hash_cache.py"),
    ("level1/23_Softmax", "tests/solutions/cheats/pointer_cache.py"),
    ("level2/86_Matmul_Divide_GELU", "examples/solutions/level2/86_Matmul_Divide_GELU.py"),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    lines = [
        "| problem | solution | verdict | failed check | sol ms | baseline ms (type) | speedup | custom kernel time share | warnings | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    for problem_id, solution in CASES:
        started = time.perf_counter()
        r = evaluate(EvalRequest(problem_id, ROOT / solution, device="cuda", timeout_s=args.timeout))
        fmt = lambda v: "-" if v is None else f"{v:.4g}"  # noqa: E731
        line = (
            f"| {problem_id} | {solution} | {r.status} | {r.failed_check or '-'} | {fmt(r.sol_ms)} "
            f"| {fmt(r.baseline_ms)} ({r.baseline_type or '-'}) | {fmt(r.speedup)} "
            f"| {fmt(getattr(r, 'custom_kernel_time_fraction', None))} "
            f"| {'; '.join(getattr(r, 'warnings', []) or []) or '-'} | {time.perf_counter() - started:.1f} |"
        )
        if r.error and r.status != "incorrect":
            line += f" <!-- {r.error[:200]} -->"
        lines.append(line)
        print(line, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
