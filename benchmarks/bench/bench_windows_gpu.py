"""The supervisor's window timing on a GPU: honest solutions (fidelity against the solution
process's own events, spread over separate evaluations, speedups against the previous
evaluator), attacks on the timing, hangs, and the cost of an evaluation phase by phase.

    git archive 4c0e2cf kernelbench_v3 problems | tar -x -C old_kbv3     # the previous evaluator
    PYTHONPATH=. python3 benchmarks/bench/bench_windows_gpu.py --parts honest,attacks,hangs,old --out DIR
    python3 benchmarks/bench/bench_windows_gpu.py --report DIR          # the tables from the journal

Every evaluation is one line of DIR/windows_gpu.jsonl (resumable: a part's lines already there
are not run again); the report prints markdown tables. `honest` evaluates in this process with
warm zygotes (each solution still gets a fresh sandboxed process); `old` runs the previous
evaluator's `kbv3 eval --json` in a subprocess with the same timing budget.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
EX = "examples/solutions"
HONEST = [
    ("level1/26_GELU_", f"{EX}/level1/26_GELU_.py"),
    ("level1/23_Softmax", f"{EX}/level1/23_Softmax.py"),
    ("level1/40_LayerNorm", f"{EX}/level1/40_LayerNorm.py"),
    ("level1/1_Square_matrix_multiplication_", f"{EX}/level1/1_Square_matrix_multiplication_.py"),
    ("level2/86_Matmul_Divide_GELU", f"{EX}/level2/86_Matmul_Divide_GELU.py"),
    ("tile_specialized/gemm_bias_relu", f"{EX}/tile_specialized/gemm_bias_relu.py"),
]
TA = "tests/solutions/timing_attacks"
ATTACKS = [  # (file, what must happen)
    (f"{TA}/timer_scaled_fast.py", "scored within 3% of honest (or failed)"),
    (f"{TA}/timer_divided_30.py", "scored within 3% of honest (or failed)"),
    (f"{TA}/window_handler_skip.py", "timed_outputs"),
    (f"{TA}/window_handler_deferred.py", "timed_outputs (or scored within 3% of honest)"),
    (f"{TA}/window_batched.py", "scored at no less than one call"),
    (f"{TA}/evidence_switch_profiler.py", "library_ops"),
    (f"{TA}/dispatch_probe_switch.py", "correct, Triton time"),
    (f"{TA}/copy_kernel_beside_op.py", "library_ops"),
]
HANGS = [
    "tests/solutions/attacks/busy_loop_forever.py",
    "tests/solutions/attacks/sigterm_ignore_sleep.py",
    "tests/solutions/attacks/sleep_at_import.py",
]
JOURNAL = "windows_gpu.jsonl"


def _summary(rec, **extra) -> dict:
    d = rec.timing_details
    return {
        **extra,
        "problem": rec.problem_id,
        "correct": rec.correct,
        "failed": rec.failed_check,
        "error": (rec.error or "")[:300],
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
        "single_call_ms": d.get("single_call_ms"),
        "independence": d.get("independence"),
        "rotation_bytes": d.get("rotation_bytes"),
        "phase_s": rec.phase_s,
        "duration_s": rec.duration_s,
        "skipped": rec.timing_skipped,
    }


def _journal(out: Path, entry: dict) -> None:
    with open(out / JOURNAL, "a") as f:
        f.write(json.dumps(entry, default=str) + "\n")
    print(
        json.dumps(
            {
                k: entry.get(k)
                for k in (
                    "part",
                    "problem",
                    "run",
                    "file",
                    "correct",
                    "failed",
                    "sol_ms",
                    "event_ms",
                    "speedup",
                    "duration_s",
                    "seconds",
                )
            },
            default=str,
        ),
        flush=True,
    )


def _done(out: Path) -> list[dict]:
    path = out / JOURNAL
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def honest(out: Path, runs: int, only: str = "") -> None:
    from kernelbench_v3.evaluate import evaluate
    from kernelbench_v3.evaluate.supervisor.evaluation import keep_zygotes_warm

    keep_zygotes_warm()
    seen = {(e["problem"], e["run"]) for e in _done(out) if e["part"] == "honest"}
    for run in range(runs):
        for problem, solution in HONEST:
            if (problem, run) not in seen and (not only or problem in only.split(",")):
                _journal(out, _summary(evaluate(problem, str(ROOT / solution), device="cuda"), part="honest", run=run))


def attacks(out: Path) -> None:
    from kernelbench_v3.evaluate import evaluate
    from kernelbench_v3.evaluate.supervisor.evaluation import keep_zygotes_warm

    keep_zygotes_warm()
    seen = {e["file"] for e in _done(out) if e["part"] == "attacks"}
    for path, expect in ATTACKS:
        if path not in seen:
            rec = evaluate("level1/23_Softmax", str(ROOT / path), device="cuda", scan_source=False)
            _journal(out, _summary(rec, part="attacks", file=path, expect=expect))


def hangs(out: Path) -> None:
    from kernelbench_v3.evaluate import evaluate

    def one(path: str) -> dict:
        started = time.monotonic()
        rec = evaluate("level1/23_Softmax", str(ROOT / path), device="cuda", scan_source=False, baseline=False)
        return _summary(rec, part="hangs", file=path, seconds=round(time.monotonic() - started, 1))

    if not any(e["part"] == "hangs" for e in _done(out)):
        with ThreadPoolExecutor(len(HANGS)) as pool:
            for entry in pool.map(one, HANGS):
                _journal(out, entry)


def old(out: Path, old_root: Path, seconds: float) -> None:
    seen = {e["problem"] for e in _done(out) if e["part"] == "old"}
    env = dict(os.environ, PYTHONPATH=str(old_root))
    for problem, solution in HONEST:
        if problem in seen:
            continue
        started = time.monotonic()
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
            "--timing-seconds",
            str(seconds),
        ]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=old_root)
        try:
            rec = json.loads(proc.stdout)
        except ValueError:
            rec = {"error": (proc.stderr or proc.stdout)[-500:]}
        _journal(
            out,
            {
                "part": "old",
                "problem": problem,
                "correct": rec.get("correct"),
                "sol_ms": rec.get("sol_ms"),
                "speedup": rec.get("speedup"),
                "baseline_ms": rec.get("baseline_ms"),
                "eager_ms": rec.get("eager_ms"),
                "compiled_ms": rec.get("compiled_ms"),
                "flags": rec.get("timing_flags"),
                "phase_s": rec.get("phase_s"),
                "duration_s": rec.get("duration_s"),
                "seconds": round(time.monotonic() - started, 1),
                "error": rec.get("error"),
            },
        )


def _pct(a: float, b: float) -> str:
    return f"{(a / b - 1) * 100:+.1f}%" if a and b else "-"


def report(out: Path) -> str:
    entries = _done(out)
    lines = [
        "## Honest solutions: scored time (supervisor's window slope) against the solution process's events",
        "",
        "| problem | runs | scored ms (median) | event ms (median) | scored vs event | spread of scored (max/min-1) | "
        "rel. s.e. (median) | baseline ms | speedup (median) | previous evaluator: sol ms / speedup | flags |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    old_by = {e["problem"]: e for e in entries if e["part"] == "old"}
    for problem, _ in HONEST:
        runs = [e for e in entries if e["part"] == "honest" and e["problem"] == problem and e["sol_ms"]]
        if not runs:
            continue
        sol = [e["sol_ms"] for e in runs]
        ev = [e["event_ms"] for e in runs if e["event_ms"]]
        sp = [e["speedup"] for e in runs if e["speedup"]]
        se = [e["fit"]["rel_se"] for e in runs if e.get("fit") and e["fit"].get("rel_se") is not None]
        o = old_by.get(problem, {})
        flags = sorted({f for e in runs for f in e["flags"]}) or "none"
        lines.append(
            f"| {problem} | {len(runs)} | {statistics.median(sol):.5f} | {statistics.median(ev):.5f} | "
            f"{_pct(statistics.median(sol), statistics.median(ev))} | {(max(sol) / min(sol) - 1) * 100:.2f}% | "
            f"{statistics.median(se) * 100 if se else float('nan'):.2f}% | {runs[0]['baseline_ms'] or 0:.5f} | "
            f"{statistics.median(sp) if sp else float('nan'):.3f} | {o.get('sol_ms') or 0:.5f} / {o.get('speedup') or 0:.3f} | {flags} |"
        )
    lines += [
        "",
        "## Attacks (level1/23_Softmax, static scan off)",
        "",
        "| file | expected | verdict | failed check | scored ms | vs honest softmax | event ms |",
        "|---|---|---|---|---|---|---|",
    ]
    soft = [
        e["sol_ms"] for e in entries if e["part"] == "honest" and e["problem"] == "level1/23_Softmax" and e["sol_ms"]
    ]
    ref = statistics.median(soft) if soft else None
    for e in entries:
        if e["part"] == "attacks":
            lines.append(
                f"| {Path(e['file']).name} | {e['expect']} | {'correct' if e['correct'] else 'failed'} | "
                f"{e['failed'] or '-'} | {e['sol_ms'] or '-'} | {_pct(e['sol_ms'], ref)} | {e['event_ms'] or '-'} |"
            )
    lines += [
        "",
        "## Hangs, default step limits",
        "",
        "| file | verdict | failed check | seconds to the verdict |",
        "|---|---|---|---|",
    ]
    for e in entries:
        if e["part"] == "hangs":
            lines.append(
                f"| {Path(e['file']).name} | {'correct' if e['correct'] else 'failed'} | {e['failed']} | {e['seconds']} |"
            )
    lines += [
        "",
        "## Cost per evaluation, seconds (median over the honest runs after the first; the previous evaluator: one run)",
        "",
        "| phase | this evaluator | previous evaluator |",
        "|---|---|---|",
    ]
    warm = [e for e in entries if e["part"] == "honest" and e["run"] > 0]
    olds = [e for e in entries if e["part"] == "old" and e.get("phase_s")]
    phases = sorted({p for e in warm + olds for p in (e.get("phase_s") or {})})
    for phase in phases + ["duration_s"]:

        def med(es, key=phase):
            vals = [(e.get("phase_s") or {}).get(key) if key != "duration_s" else e.get("duration_s") for e in es]
            vals = [v for v in vals if v is not None]
            return f"{statistics.median(vals):.2f}" if vals else "-"

        lines.append(f"| {phase} | {med(warm)} | {med(olds)} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="honest,attacks,hangs,old")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--old", type=Path, default=ROOT / "old_kbv3")
    parser.add_argument("--old-seconds", type=float, default=6.0, help="the previous evaluator's --timing-seconds")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--only", default="", help="honest: only these problems (comma-separated)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.report:
        for part in args.parts.split(","):
            if part == "honest":
                honest(args.out, args.runs, args.only)
            elif part == "attacks":
                attacks(args.out)
            elif part == "hangs":
                hangs(args.out)
            elif part == "old":
                old(args.out, args.old.resolve(), args.old_seconds)
    text = report(args.out)
    (args.out / "windows_gpu.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
