"""Benchmark: build the Hub dataset folder from problems/ and load all three splits back.

Target: build + load of all three splits in under 5 s on the 2-core development machine.
Each round is a fresh Python process (what `kbv3 build` followed by `load_dataset` costs a
user), offline, with its own empty HF cache; it reports its phases:

- imports: torch, datasets and kernelbench_v3.dataset.hub (paid once by any user of the library);
- build: `hub.build` (catalog, meta-device specs of 60 problems, prompts, Parquet, card). The
  first PyTorch meta kernel written in Python imports torch._dynamo (~1-3 s), inside this phase;
- load: `load_problems(split, folder)` for the three splits (Parquet -> Arrow cache, through the
  card's YAML configs).

    python benchmarks/bench/bench_hub.py [--problems DIR] [--rounds N] [--no-prompts]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROUND = r"""
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import torch, datasets
from kernelbench_v3.dataset import hub
t1, c1 = time.perf_counter(), time.process_time()
datasets.disable_progress_bars()
problems = sys.argv[2] or None
with_prompts = False if sys.argv[3] == "no" else None
result = hub.build(sys.argv[1], problems, with_prompts=with_prompts)
t2, c2 = time.perf_counter(), time.process_time()
counts = {s: len(hub.load_problems(s, sys.argv[1])) for s in hub.SPLITS}
t3, c3 = time.perf_counter(), time.process_time()
assert counts == dict(result.counts), (counts, result.counts)
print("RESULT" + json.dumps({"imports": t1 - t0, "build": t2 - t1, "load": t3 - t2,
                             "cpu_imports": c1 - c0, "cpu_work": c3 - c1,
                             "counts": counts, "prompts": result.with_prompts}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=Path, default=None, help="problems folder (default: bundled)")
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes to time")
    parser.add_argument("--no-prompts", action="store_true", help="build without the prompt column")
    args = parser.parse_args()

    import datasets
    import torch

    print(
        f"python {platform.python_version()}, torch {torch.__version__}, datasets {datasets.__version__}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start"
    )
    work = Path(tempfile.mkdtemp(prefix="bench-hub-"))
    totals, cpu = [], []
    for i in range(args.rounds):
        env = dict(
            os.environ,
            HF_HUB_OFFLINE="1",
            HF_DATASETS_OFFLINE="1",
            HF_HOME=str(work / f"hf{i}"),
            KBV3_MODULE_DIR=str(work / f"modules{i}"),
        )
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                ROUND,
                str(work / f"build{i}"),
                str(args.problems or ""),
                "no" if args.no_prompts else "auto",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            return 1
        r = json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))[6:])
        work_s = r["build"] + r["load"]
        totals.append(work_s)
        cpu.append(r["cpu_work"])
        print(
            f"round {i}: imports {r['imports']:.2f} s | build {r['build']:.2f} s + load 3 splits "
            f"{r['load']:.2f} s = {work_s:.2f} s wall, {r['cpu_work']:.2f} s CPU "
            f"(imports: {r['cpu_imports']:.2f} s CPU) rows {r['counts']} prompt column: {r['prompts']}"
        )
    print(
        f"build + load of all three splits (fresh process, imports excluded): wall best "
        f"{min(totals):.2f} s, median {sorted(totals)[len(totals) // 2]:.2f} s; CPU best {min(cpu):.2f} s; "
        f"target < 5 s; load average {os.getloadavg()[0]:.1f} at end (2 CPUs shared with other work)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
