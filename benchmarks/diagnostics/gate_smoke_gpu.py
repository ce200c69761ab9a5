"""Smoke of the gated call on a GPU: a few evaluations, their timing details, the baseline's.

PYTHONPATH=. python3 benchmarks/diagnostics/gate_smoke_gpu.py [PROBLEM=SOLUTION ...]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
EX = REPO / "examples" / "solutions"
DEFAULT = [
    ("level1/23_Softmax", EX / "level1/23_Softmax.py"),
    ("level1/1_Square_matrix_multiplication_", EX / "level1/1_Square_matrix_multiplication_.py"),
]


def main() -> None:
    import os

    from kernelbench_v3.evaluate import EvalRequest, evaluate

    raw_out = Path(os.environ.get("OUT", "/tmp")) / f"raw_{os.environ.get('LABEL', 'plain')}.jsonl"
    pairs = [(a.split("=")[0], Path(a.split("=")[1])) for a in sys.argv[1:]] or DEFAULT
    for problem, path in pairs:
        started = time.perf_counter()
        rec = evaluate(EvalRequest(problem, path, device="cuda")).to_dict()
        d = rec.get("timing_details") or {}
        with open(raw_out, "a") as f:
            f.write(
                json.dumps({"problem": problem, "raw": d.get("raw_calls_ms"), "echo_call_ms": d.get("echo_call_ms")})
                + "\n"
            )
        print(
            json.dumps(
                {
                    "problem": problem,
                    "wall_s": round(time.perf_counter() - started, 1),
                    **{
                        k: rec.get(k)
                        for k in (
                            "status",
                            "failed_check",
                            "error",
                            "sol_ms",
                            "baseline_ms",
                            "baseline_type",
                            "eager_ms",
                            "compiled_ms",
                            "speedup",
                            "timing_method",
                            "timing_flags",
                            "phase_s",
                            "baseline_error",
                        )
                    },
                    "timing": {k: v for k, v in d.items() if k != "raw_calls_ms"},
                },
                default=str,
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
