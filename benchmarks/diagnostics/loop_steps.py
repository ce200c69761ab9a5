"""Where a timed call's loop goes, from a batch journal's records (`timing_details.loop_ms`,
`measure.LOOP_STEPS`): per step, the median over the records of each record's median, and the
records whose loop cost the most per call. Reads journals only; no GPU needed:

    PYTHONPATH=. python3 benchmarks/diagnostics/loop_steps.py RESULTS.parquet.journal.jsonl [--top 8]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from kernelbench_v3.evaluate.supervisor.timing.measure import LOOP_STEPS as STEPS


def records(path: Path) -> list[dict]:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{path}:{number}: not JSON ({exc})") from None
        if "problem_id" in row and (row.get("timing_details") or {}).get("loop_ms"):
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("journal", type=Path)
    parser.add_argument("--top", type=int, default=8)
    args = parser.parse_args(argv)
    rows = records(args.journal)
    if not rows:
        print(f"{args.journal}: no record with timing_details.loop_ms", file=sys.stderr)
        return 1
    print(f"{len(rows)} timed records; ms per scored call, median over records (p90)\n")
    print("| step | median ms | p90 ms |\n|---|---|---|")
    for step in STEPS:
        values = sorted(r["timing_details"]["loop_ms"].get(step, 0.0) for r in rows)
        p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
        print(f"| {step} | {statistics.median(values):.3f} | {p90:.3f} |")
    print(f"\nThe {args.top} records with the costliest loop per call (sum of step medians):\n")
    print("| problem | calls | judge share | " + " | ".join(STEPS) + " | sum |")
    print("|---|---|---|" + "---|" * (len(STEPS) + 1))

    def total(row: dict) -> float:
        return sum(row["timing_details"]["loop_ms"].values())

    for row in sorted(rows, key=total, reverse=True)[: args.top]:
        details = row["timing_details"]
        steps = " | ".join(f"{details['loop_ms'].get(s, 0.0):.2f}" for s in STEPS)
        share = details.get("judge_share")
        print(
            f"| {row['problem_id']} | {details['calls']['calls']} | "
            f"{share if share is None else round(share, 2)} | {steps} | {total(row):.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
