"""GPU smoke of the evaluator's stream-escape rule: the honest Triton softmax and the same kernel
launched on a side stream (tests/solutions/gpu/side_stream_softmax.py), evaluated in turn.

The honest solution should be scored by its CUDA-event median with no flag; the side-stream one
should carry `wall_clock_exceeds_events` and be scored by the synchronized wall clock per call
(`timing_details.sol_ms_source`), its event median kept as `event_median_ms`. Prints a markdown
table and writes it to --out. Needs torch and triton only.

    python benchmarks/diagnostics/smoke_side_stream_gpu.py --out benchmarks/results/side_stream_gpu.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kernelbench_v3.evaluate import EvalRequest, evaluate  # noqa: E402
from kernelbench_v3.evaluate.supervisor.fingerprint import device_name, software  # noqa: E402

PROBLEM = "level1/23_Softmax"
SOLUTIONS = [ROOT / "examples/solutions/level1/23_Softmax.py", ROOT / "tests/solutions/gpu/side_stream_softmax.py"]


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=200.0)
    args = parser.parse_args()
    fp = software()
    lines = [
        f"# Stream-escape smoke ({device_name('cuda')}; torch {fp['torch']}, triton {fp.get('triton')})",
        "",
        f"Problem `{PROBLEM}`, default shapes, 2 seeds, no second shape, no baseline.",
        "",
        "| solution | status | failed check | sol ms (scored) | event median ms | wall ms per call | device busy ms per call | source | flags |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for path in SOLUTIONS:
        rec = evaluate(
            EvalRequest(
                PROBLEM, path, device="cuda", timeout_s=args.timeout, seeds=(42, 123), other_shape=False, baseline=False
            )
        )
        details = rec.timing_details or {}
        event_ms = details.get("event_median_ms", rec.sol_ms)
        lines.append(
            f"| {path.name} | {rec.status} | {_fmt(rec.failed_check)} | {_fmt(rec.sol_ms)} | {_fmt(event_ms)} | "
            f"{_fmt(rec.sol_wall_ms)} | {_fmt(details.get('device_busy_ms'))} | "
            f"{details.get('sol_ms_source', 'cuda events')} | "
            f"{', '.join(rec.timing_flags) or '-'} |"
        )
        if rec.error and rec.status != "correct":
            lines.append(f"<!-- {path.name}: {rec.error[:300]} -->")
        print(lines[-1], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
