"""Smoke check of the supervisor's window timing on a GPU: a few evaluations, one line each.

PYTHONPATH=. python3 benchmarks/diagnostics/smoke_windows_gpu.py [PROBLEM=SOLUTION ...]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kernelbench_v3.evaluate import evaluate  # noqa: E402

DEFAULT = [
    "level1/26_GELU_=examples/solutions/level1/26_GELU_.py",
    "level1/1_Square_matrix_multiplication_=examples/solutions/level1/1_Square_matrix_multiplication_.py",
]


def main() -> None:
    for item in sys.argv[1:] or DEFAULT:
        problem, solution = item.split("=", 1)
        started = time.time()
        rec = evaluate(problem, str(ROOT / solution), device="cuda")
        d = rec.timing_details
        print(
            json.dumps(
                {
                    "problem": problem,
                    "correct": rec.correct,
                    "failed": rec.failed_check,
                    "error": (rec.error or "")[:600],
                    "sol_ms": rec.sol_ms,
                    "event_ms": rec.event_ms,
                    "baseline_ms": rec.baseline_ms,
                    "eager_ms": rec.eager_ms,
                    "compiled_ms": rec.compiled_ms,
                    "speedup": rec.speedup,
                    "method": rec.timing_method,
                    "flags": rec.timing_flags,
                    "fit": d.get("fit"),
                    "sizes": d.get("window_sizes"),
                    "echo_ms": d.get("echo_window_ms"),
                    "windows": d.get("windows", [])[:60],
                    "sets": d.get("timed_sets"),
                    "single": d.get("single_call_ms"),
                    "graph_error": d.get("graph_error"),
                    "phase_s": rec.phase_s,
                    "wall_s": round(time.time() - started, 1),
                    "evidence": rec.kernel_evidence,
                    "checks": {k: v for k, v in rec.checks.items() if v != "pass"},
                    "warnings": rec.warnings,
                },
                default=str,
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
