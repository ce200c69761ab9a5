"""How long `kbv3 runs anomalies` takes on a cold cache (the target: under 5 s on a 2-core CPU).

Each run is a fresh process (`python -m kernelbench_v3.cli runs anomalies --source FIXTURE`) with
`KBV3_CACHE_DIR` pointing at a new empty folder, so nothing computed before is reused; imports
are included, as a user pays for them. A warm run (same cache again) follows for comparison.
With `--uncached`, also times what the shipped facts table saves: computing every problem's
facts on the CPU (`problem_facts.facts_table(..., shipped=False)`), the old cold path.

    python benchmarks/bench/bench_anomalies_cold.py [--repeats 3] [--uncached]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "runs" / "published_schema_fixture"


def timed_run(cache: Path) -> tuple[float, int, str]:
    env = {**os.environ, "KBV3_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "kernelbench_v3.cli", "runs", "anomalies", "--source", str(FIXTURE)],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    elapsed = time.perf_counter() - started
    first = proc.stdout.splitlines()[0] if proc.stdout else proc.stderr.strip()[-200:]
    return elapsed, proc.returncode, first


def uncached_facts_seconds() -> float:
    sys.path.insert(0, str(REPO))
    from kernelbench_v3.catalog.problem import discover
    from kernelbench_v3.runs.facts import facts_table

    problems = discover()
    started = time.perf_counter()
    facts_table(problems, cache=False, shipped=False, progress=False)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--uncached", action="store_true", help="also time computing every problem's facts")
    args = parser.parse_args()

    print(
        f"# kbv3 runs anomalies on a cold cache: {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.2f} at the start "
        "(other jobs share this machine)"
    )
    print(f"# source: {FIXTURE.relative_to(REPO)}; each run a fresh process with an empty KBV3_CACHE_DIR")
    print()
    print("| run | cache | wall s | exit | first line of output |")
    print("|---|---|---|---|---|")
    colds = []
    with tempfile.TemporaryDirectory(prefix="kbv3-bench-") as tmp:
        for i in range(args.repeats):
            cache = Path(tmp) / f"cold{i}"
            cache.mkdir()
            elapsed, code, first = timed_run(cache)
            colds.append(elapsed)
            print(f"| {i + 1} | cold (empty) | {elapsed:.2f} | {code} | {first} |")
        elapsed, code, first = timed_run(Path(tmp) / "cold0")
        print(f"| {args.repeats + 1} | warm (run 1's) | {elapsed:.2f} | {code} | {first} |")
    print()
    print(f"cold: median {sorted(colds)[len(colds) // 2]:.2f} s, max {max(colds):.2f} s over {len(colds)} runs")
    if args.uncached:
        print(
            f"computing the facts of every bundled problem instead of reading the shipped table: "
            f"{uncached_facts_seconds():.1f} s (in-process, imports excluded)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
