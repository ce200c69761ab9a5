"""A cold baseline started as a program against one forked by the baseline server (issue 42).

For each problem, the same baseline child (`isolate.run_child("baseline", ...)`: build, compile
with torch.compile(mode="reduce-overhead"), time eager and compiled) twice: as a program (the
warm servers off) and forked by the baseline server (`supervisor.reference.baseline_server`).
Each way has Triton and inductor caches of its own, so neither compiles from the other's cache;
the server is launched by the first served child, whose start therefore holds the server's
imports. Prints and writes (JSON lines, `--out`) each child's wall, steps (`baseline_child.
CHILD_STEPS`), eager and compiled milliseconds; then the median of each way.

    PYTHONPATH=. python3 benchmarks/diagnostics/served_baseline_gpu.py --out /tmp/served.jsonl
    PYTHONPATH=. python3 benchmarks/diagnostics/served_baseline_gpu.py --device cpu --out /tmp/s.jsonl  # rehearsal

Also prints the ten slowest imports of torch.compile's modules in a fresh interpreter
(`python -X importtime`), the cost a served child no longer pays.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from kernelbench_v3.catalog.problem import get_problem  # noqa: E402
from kernelbench_v3.evaluate.request import DEFAULT_TIMING_SECONDS  # noqa: E402
from kernelbench_v3.evaluate.supervisor.reference.baseline_child import child_steps  # noqa: E402
from kernelbench_v3.evaluate.supervisor.reference.isolate import run_child  # noqa: E402

PROBLEMS = "level1/1_Square_matrix_multiplication_,level2/55_Matmul_MaxPool_Sum_Scale,level1/23_Softmax,level1/26_GELU_"


def one(problem_id: str, device: str, way: str, caches: Path) -> dict:
    problem = get_problem(problem_id)
    sizes = dict(problem.reduced) if device == "cpu" and problem.reduced_sizes else {}
    spec = {
        "device": device,
        "problem_path": str(problem.path),
        "sizes": sizes,
        "seeds": [42],
        "timing_seconds": DEFAULT_TIMING_SECONDS[device],
    }
    env = {
        "TRITON_INTERPRET": "1" if device == "cpu" else "0",
        "TRITON_CACHE_DIR": str(caches / "triton"),
        "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
    }
    os.environ["KBV3_ZYGOTE_SERVER"] = "1" if way == "served" else "0"
    with tempfile.TemporaryDirectory(prefix="kbv3-served-probe-") as tmp:
        started = time.monotonic()
        outcome = run_child("baseline", Path(tmp), spec, timeout_s=600, env=env)
        wall = time.monotonic() - started
    result = outcome.result or {}
    return {
        "problem": problem_id,
        "way": way,
        "wall_s": round(wall, 3),
        "ok": bool(result.get("ok")),
        "served": result.get("served"),
        "steps_s": child_steps(outcome),
        "eager_ms": (result.get("eager") or {}).get("median_ms"),
        "compiled_ms": (result.get("compiled") or {}).get("median_ms"),
        "error": result.get("error") or outcome.reason or None,
    }


def import_times(top: int = 10) -> list[str]:
    code = "import torch, torch._dynamo, torch._inductor.compile_fx"
    run = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True)
    rows = []
    for line in run.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    total = max((us for us, _ in rows), default=0)
    return [f"cumulative {us / 1e6:.2f} s {name}" for us, name in sorted(rows, reverse=True)[:top]] + [
        f"(largest cumulative: {total / 1e6:.2f} s)"
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--problems", default=PROBLEMS)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    os.environ["KBV3_TEST_SERVER_TAG"] = uuid.uuid4().hex  # a server of this run's own
    work = Path(tempfile.mkdtemp(prefix="kbv3-served-probe-caches-"))
    rows = []
    for way in ("program", "served"):
        for problem_id in args.problems.split(","):
            row = one(problem_id, args.device, way, work / way)
            rows.append(row)
            with args.out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)

    text = table(rows, args.device) + ["", "The slowest imports of torch.compile in a fresh interpreter:", ""]
    text += [f"    {line}" for line in import_times()]
    args.out.with_suffix(".md").write_text("\n".join(text) + "\n")
    print("\n".join(text), flush=True)
    return 0


def table(rows: list[dict], device: str) -> list[str]:
    """One row per child: its wall and steps; then each way's median (served: also without its
    first child, which waited for the server's imports)."""
    import torch

    name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    steps = ("start", "import", "build", "compile", "eager", "compiled", "exit")
    lines = [
        f"# A cold baseline's child: started as a program vs forked by the baseline server ({name})",
        "",
        "| problem | way | ok | wall s | " + " | ".join(f"{s} s" for s in steps) + " | eager ms | compiled ms |",
        "|---|---|---|---|" + "---|" * (len(steps) + 2),
    ]
    for r in rows:
        got = r["steps_s"] or {}
        cells = [f"{got[s]:.2f}" if s in got else "-" for s in steps]
        ms = [f"{r[k]:.4g}" if r[k] is not None else "-" for k in ("eager_ms", "compiled_ms")]
        lines.append(
            f"| {r['problem']} | {r['way']} | {r['ok']} | {r['wall_s']:.2f} | " + " | ".join(cells + ms) + " |"
        )
    lines.append("")
    for way in ("program", "served"):
        walls = [r["wall_s"] for r in rows if r["way"] == way and r["ok"]]
        if not walls:
            continue
        line = f"- {way}: median wall {statistics.median(walls):.2f} s over {len(walls)}"
        if way == "served" and len(walls) > 1:  # the first served child waited for the server's imports
            line += f"; without the first (the server's launch) {statistics.median(walls[1:]):.2f} s"
        lines.append(line)
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
