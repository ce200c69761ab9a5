"""The trusted-supervisor evaluator on a GPU: honest solutions against the previous method, and
cheating solutions of every threat class.

Each evaluation is a separate `python -m kernelbench_v3 eval --json` process, so the previous
evaluator (a copy of the package at an older commit, `--old DIR`, put first on PYTHONPATH) and the
current one run the same way, alternating, on the same GPU.

    git archive 7d376a0 kernelbench_v3 problems | tar -x -C old_kbv3   # the previous evaluator
    python benchmarks/bench/bench_supervisor_gpu.py --part fidelity --runs 3 --old old_kbv3 --out DIR
    python benchmarks/bench/bench_supervisor_gpu.py --part attacks --out DIR
    python benchmarks/bench/bench_supervisor_gpu.py --report DIR   # tables from the saved journal

Writes DIR/supervisor_gpu.jsonl (one line per evaluation) and prints markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EX = "examples/solutions"
ATTACKS = "tests/solutions/attacks"
CUDA_ATTACKS = "tests/solutions/gpu"

HONEST = [  # (problem, solution, runs per method): the 12-15 us kernels spread most between runs
    ("level1/23_Softmax", f"{EX}/level1/23_Softmax.py", 3),
    ("level1/26_GELU_", f"{EX}/level1/26_GELU_.py", 3),
    ("level1/1_Square_matrix_multiplication_", f"{EX}/level1/1_Square_matrix_multiplication_.py", 1),
    ("level1/40_LayerNorm", f"{EX}/level1/40_LayerNorm.py", 1),
    ("level2/86_Matmul_Divide_GELU", f"{EX}/level2/86_Matmul_Divide_GELU.py", 1),
    ("tile_specialized/gemm_bias_relu", f"{EX}/tile_specialized/gemm_bias_relu.py", 1),
]
# (problem, solution, class, extra CLI flags, what must happen)
NO_SCAN = ["--no-source-scan"]  # what the other defences do on their own
CHEATS = [
    (
        "level1/23_Softmax",
        f"{CUDA_ATTACKS}/forged_event_clock_softmax.py",
        "T2",
        ["--kernel-rule", "v3", *NO_SCAN],
        "supervisor_clock flag, bounded time",
    ),
    ("level1/23_Softmax", f"{CUDA_ATTACKS}/forged_event_clock_softmax.py", "T2", [], "source_scan"),
    ("level1/23_Softmax", f"{ATTACKS}/json_rewrite.py", "T2", NO_SCAN, "correctness"),
    ("level1/23_Softmax", f"{ATTACKS}/stack_walk_getframe.py", "T2", NO_SCAN, "correctness"),
    ("level1/23_Softmax", f"{ATTACKS}/token_kernel.py", "T1", [], "main_work"),
    ("level2/86_Matmul_Divide_GELU", f"{CUDA_ATTACKS}/matmul_with_triton_epilogue.py", "T1", [], "library_ops"),
    ("level1/23_Softmax", f"{ATTACKS}/empty_after_warmup.py", "T1", [], "timed_outputs"),
    ("level1/23_Softmax", f"{ATTACKS}/persist_baselines.py", "T3", NO_SCAN, "correct; cache unchanged"),
    ("level1/23_Softmax", f"{ATTACKS}/busy_loop_forever.py", "T4", ["--timeout", "60"], "process, bounded time"),
]


def _eval(problem: str, solution: str, flags: list[str], old: Path | None, timeout: float) -> dict:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = str(old if old else ROOT)
    cmd = [
        sys.executable,
        "-m",
        "kernelbench_v3",
        "eval",
        "--problem",
        problem,
        "--solution",
        str(ROOT / solution),
        "--device",
        "cuda",
        "--json",
        "--no-baseline",
        *flags,
    ]
    started = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd="/tmp")
    except subprocess.TimeoutExpired:
        return {"error": f"evaluation exceeded {timeout} s", "wall_s": time.perf_counter() - started}
    wall = time.perf_counter() - started
    line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")), None)
    if line is None:
        return {"error": (proc.stderr or proc.stdout)[-1500:], "wall_s": wall}
    record = json.loads(line)
    record["wall_s"] = wall
    return record


def _journal(out: Path, entry: dict) -> None:
    with open(out / "supervisor_gpu.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def fidelity(out: Path, runs: int, old: Path | None, only: str = "", methods: str = "previous,supervisor") -> None:
    for r in range(runs):
        for problem, solution, wanted in HONEST:
            if only not in problem or r >= wanted:
                continue
            for method, path in (("previous", old), ("supervisor", None)):
                if (method == "previous" and old is None) or method not in methods:
                    continue
                rec = _eval(problem, solution, [], path, 900)
                entry = {
                    "part": "fidelity",
                    "run": r,
                    "method": method,
                    "problem": problem,
                    "solution": solution,
                    "status": rec.get("status"),
                    "sol_ms": rec.get("sol_ms"),
                    "flags": rec.get("timing_flags"),
                    "supervisor_ms": (rec.get("timing_details") or {}).get("supervisor_ms"),
                    "reported_ms": (rec.get("timing_details") or {}).get("reported_ms"),
                    "supervisor_per_batch_ms": (rec.get("timing_details") or {}).get("supervisor_per_batch_ms"),
                    "verified": (rec.get("timing_details") or {}).get("verified_timed_outputs"),
                    "sandbox": rec.get("sandbox"),
                    "phase_s": rec.get("phase_s"),
                    "wall_s": rec.get("wall_s"),
                    "error": rec.get("error"),
                }
                _journal(out, entry)
                print(json.dumps(entry), flush=True)


def attacks(out: Path, only: str = "") -> None:
    cache = Path(os.environ.get("KBV3_CACHE_DIR", Path.home() / ".cache" / "kbv3"))
    for problem, solution, klass, flags, expect in CHEATS:
        if only not in solution or not (ROOT / solution).exists():
            continue
        before = {p: p.read_bytes() for p in cache.rglob("*.json")} if cache.exists() else {}
        rec = _eval(problem, solution, flags, None, 300)
        after = {p: p.read_bytes() for p in cache.rglob("*.json")} if cache.exists() else {}
        entry = {
            "part": "attacks",
            "problem": problem,
            "solution": solution,
            "class": klass,
            "flags_cli": flags,
            "expect": expect,
            "status": rec.get("status"),
            "failed_check": rec.get("failed_check"),
            "timing_flags": rec.get("timing_flags"),
            "sol_ms": rec.get("sol_ms"),
            "supervisor_ms": (rec.get("timing_details") or {}).get("supervisor_ms"),
            "reported_ms": (rec.get("timing_details") or {}).get("reported_ms"),
            "sandbox": rec.get("sandbox"),
            "cache_changed": before != after,
            "wall_s": rec.get("wall_s"),
            "error": (rec.get("error") or "")[:300],
        }
        _journal(out, entry)
        print(json.dumps(entry), flush=True)


def report(out: Path) -> str:
    rows = [json.loads(line) for line in (out / "supervisor_gpu.jsonl").read_text().splitlines() if line.strip()]
    lines = []
    fid = [r for r in rows if r["part"] == "fidelity"]
    if fid:
        lines += [
            "| problem | method | runs | reported ms per run | median | spread | scored ms per run | supervisor ms | flags | verified | status |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        medians: dict[tuple[str, str], float] = {}
        for problem, _, _ in HONEST:
            for method in ("previous", "supervisor"):
                group = [r for r in fid if r["problem"] == problem and r["method"] == method]
                if not group:
                    continue
                reported = [r.get("reported_ms") or r.get("sol_ms") for r in group if r.get("sol_ms")]
                scored = [r["sol_ms"] for r in group if r.get("sol_ms")]
                if not reported:
                    lines.append(
                        f"| {problem} | {method} | {len(group)} | - | - | - | - | - | - | - | {str(group[0].get('error'))[:80]} |"
                    )
                    continue
                med = medians[(problem, method)] = statistics.median(reported)
                sup = [r.get("supervisor_ms") for r in group if r.get("supervisor_ms")]
                flags = sorted({f for r in group for f in (r.get("flags") or [])})
                lines.append(
                    f"| {problem} | {method} | {len(group)} | {', '.join(f'{t:.5f}' for t in reported)} | {med:.5f} | "
                    f"{(max(reported) - min(reported)) / med:.2%} | {', '.join(f'{t:.5f}' for t in scored)} | "
                    f"{', '.join(f'{t:.5f}' for t in sup) or '-'} | {', '.join(flags) or '-'} | "
                    f"{', '.join(str(r.get('verified')) for r in group)} | {', '.join(sorted({str(r['status']) for r in group}))} |"
                )
        lines += ["", "| problem | reported median, supervisor / previous |", "|---|---|"]
        for problem, _, _ in HONEST:
            a, b = medians.get((problem, "supervisor")), medians.get((problem, "previous"))
            if a and b:
                lines.append(f"| {problem} | {a / b:.4f} ({(a / b - 1):+.2%}) |")
    att = [r for r in rows if r["part"] == "attacks"]
    if att:
        lines += [
            "",
            "| class | problem | solution | flags | expected | status | failed check | timing flags | reported ms | scored ms | cache changed | wall s |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in att:
            fmt = lambda v: "-" if v is None else f"{v:.4g}"  # noqa: E731
            lines.append(
                f"| {r['class']} | {r['problem']} | {Path(r['solution']).name} | {' '.join(r['flags_cli']) or '-'} | "
                f"{r['expect']} | {r['status']} | {r['failed_check'] or '-'} | {','.join(r['timing_flags'] or []) or '-'} | "
                f"{fmt(r['reported_ms'])} | {fmt(r['sol_ms'])} | {r['cache_changed']} | {fmt(r['wall_s'])} |"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["fidelity", "attacks", "all"])
    parser.add_argument("--methods", default="previous,supervisor", help="fidelity: which evaluators to run")
    parser.add_argument("--runs", type=int, default=3, help="at most this many runs per problem and method")
    parser.add_argument("--old", type=Path, help="a copy of the previous package's parent folder")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--report", action="store_true", help="only print the tables of --out's journal")
    parser.add_argument("--only", default="", help="only problems / solutions whose path contains this")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.report:
        if args.part in ("fidelity", "all"):
            fidelity(args.out, args.runs, args.old.resolve() if args.old else None, args.only, args.methods)
        if args.part in ("attacks", "all"):
            attacks(args.out, args.only)
    text = report(args.out)
    (args.out / "supervisor_gpu.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
