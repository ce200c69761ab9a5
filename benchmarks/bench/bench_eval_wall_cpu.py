"""`kbv3 eval`'s wall time as a user runs it, each run a new CLI process, with the warm zygote
server (`evaluate.solution.zygote_server`) and without it (KBV3_ZYGOTE_SERVER=0): the median and
the largest wall, and the median of each part of it (`wall_phase_s`). The server's first run
starts the server; it is reported apart, as the cost a user pays once per idle period.

    PYTHONPATH=. python3 benchmarks/bench/bench_eval_wall_cpu.py [--runs 5] [--device cpu]

On the GPU host the same script measures the H200 (`--device cuda`), with the baseline cached by
a first run it leaves out.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROBLEM = "level1/23_Softmax"
SOLUTION = REPO / "examples" / "solutions" / "level1" / "23_Softmax.py"


def one_eval(env: dict[str, str], device: str) -> dict:
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "kernelbench_v3", "eval", "--problem", PROBLEM, "--solution", str(SOLUTION)]
        + ["--device", device, "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    record = json.loads(out.stdout)
    return {
        "wall_s": time.perf_counter() - started,
        "status": record["status"],
        "phases": record.get("wall_phase_s") or {},
    }


def _servers(tag: str) -> list[int]:
    """The warm servers started with this run's tag in their environment."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and f"KBV3_BENCH_TAG={tag}".encode() in (entry / "environ").read_bytes():
                if b"zygote_server" in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def summary(name: str, runs: list[dict]) -> str:
    walls = [r["wall_s"] for r in runs]
    parts = sorted({k for r in runs for k in r["phases"]})
    medians = {k: statistics.median(r["phases"].get(k, 0.0) for r in runs) for k in parts}
    shown = ", ".join(f"{k} {v:.2f}" for k, v in medians.items() if v >= 0.05)
    statuses = sorted({r["status"] for r in runs})
    return f"| {name} | {len(runs)} | {statistics.median(walls):.2f} | {max(walls):.2f} | {', '.join(statuses)} | {shown} |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    tag = uuid.uuid4().hex
    cache = tempfile.mkdtemp(prefix="kbv3-bench-wall-")
    base = {**os.environ, "PYTHONPATH": str(REPO), "KBV3_CACHE_DIR": cache, "KBV3_BENCH_TAG": tag}
    base.pop("KBV3_ZYGOTE_SERVER", None)
    try:
        one_eval({**base, "KBV3_ZYGOTE_SERVER": "0"}, args.device)  # the baseline cached, the disk warm
        off = [one_eval({**base, "KBV3_ZYGOTE_SERVER": "0"}, args.device) for _ in range(args.runs)]
        first = one_eval(base, args.device)
        served = [one_eval(base, args.device) for _ in range(args.runs)]
    finally:
        for pid in _servers(tag):
            os.kill(pid, signal.SIGKILL)
    print(f"`kbv3 eval --problem {PROBLEM}` (the Softmax example), device {args.device}, baseline cached")
    print()
    print("| zygote | runs | wall median s | wall max s | status | median s of each part (>= 0.05) |")
    print("|---|---|---|---|---|---|")
    print(summary("its own (KBV3_ZYGOTE_SERVER=0)", off))
    print(summary("the warm server, first run (starts it)", [first]))
    print(summary("the warm server, later runs", served))
    return 0


if __name__ == "__main__":
    sys.exit(main())
