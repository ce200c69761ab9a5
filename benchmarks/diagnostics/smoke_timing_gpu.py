"""GPU smoke test of the CUDA timer's newer parts (clock settling, confidence-interval stopping,
rotating fresh buffers): time one op directly, then one whole evaluation, and print what the
record says about the timing. Needs torch and triton only.

    PYTHONPATH=. python3 benchmarks/diagnostics/smoke_timing_gpu.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kernelbench_v3.evaluate import (  # noqa: E402
    EvalRequest,
    cuda_timing,
    evaluate,
    timing,
)
from kernelbench_v3.evaluate import fresh as F  # noqa: E402


def main() -> int:
    sets = [[torch.randn(4096, 4096, device="cuda")] for _ in range(4)]
    fresh = F.FreshInputs(sets, [torch.randn(4096, 4096, device="cuda")], sets[0], F.buffer_count(sets[0]))
    stats, _ = cuda_timing.time_cuda(
        lambda a: torch.softmax(a[0], dim=1), sets, timing.TimingPlan(max_seconds=5), fresh=fresh
    )
    keep = ("sm_clock_mhz_before", "sm_clock_mhz_after", "median_ci_rel", "fresh_buffers", "stable")
    print(
        "direct torch.softmax 4096x4096:",
        json.dumps(
            {
                "median_ms": stats.median_ms,
                "reps": stats.reps,
                "flags": stats.flags,
                **{k: stats.details.get(k) for k in keep},
            }
        ),
    )
    record = evaluate(
        EvalRequest(
            "level1/23_Softmax",
            ROOT / "examples/solutions/level1/23_Softmax.py",
            baseline=False,
            seeds=(42,),
            other_shape=False,
            timeout_s=120,
        )
    )
    print(
        "evaluator, examples softmax:",
        json.dumps(
            {
                "status": record.status,
                "sol_ms": record.sol_ms,
                "reps": record.sol_reps,
                "flags": record.timing_flags,
                "phase_s": record.phase_s,
                **{k: record.timing_details.get(k) for k in keep},
            }
        ),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
