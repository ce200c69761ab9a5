"""Batch throughput on one GPU and on two: the whole h100 split, the references as solutions.

Run from the repository root on a host with at least two GPUs (no install needed, no
`datasets`, no Ray: the local executor is what is measured):

    PYTHONPATH=. python3 benchmarks/bench/bench_batch_gpu.py --out benchmarks/results/batch_throughput_gpu.md

Each problem's reference file serves as its own solution, with the custom-kernel check relaxed
(this measures the batch machinery's throughput, not anybody's kernels). The same batch runs as
`kbv3 eval-batch --gpus 0` and then `--gpus 0,1`, both cold: each run gets its own, empty
baseline cache, Inductor cache, Triton cache, journal and output, so the second run inherits
nothing from the first but the operating system's file cache (a warm-up import of torch before
either run evens that out). Reported: wall time of each run, records and their statuses, the
summed evaluation time, and the speedup of two GPUs over one (target >= 1.8x).

To fit about 9 minutes in all, evaluations are lightened, not skipped: one correctness seed, no
second-shape check and no reference timing (the torch.compile baseline alone would take most of
the budget for 54 cold problems; `--baseline`, `--other-shape`, `--seeds ''` restore them), and
`--timeout` caps every child process of an evaluation. Each run also has a wall-clock budget (`--run-budget`); a run that exceeds it
is stopped with SIGTERM (the batch then writes what it finished) and the table says so; the
equal-work line then compares the two runs on the evaluations both finished (both runs hand out
work in the same catalog order), from each run's start to the last of those finishing. `--budget` (default 520 s)
covers both runs: the one-GPU run may use 62% of it, the two-GPU run the rest.

The timing budget per timed function is `--timing-seconds` (default 2 s; the evaluator's own
default is 15 s, stopping earlier once the median is stable): the throughput of the machinery is
what is measured, and both runs use the same setting.

The two runs can also go in separate commands (`--runs single`, then `--runs multi`, with the
same persistent `--work`), e.g. when each must fit a 10-minute call: each finished run leaves
`<work>/<tag>/summary.json`, later invocations reuse it, and the table covers every run found.
A run without a summary (killed midway) is discarded and redone cold.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from kernelbench_v3.batch.journal import read_journal  # noqa: E402
from kernelbench_v3.batch.run import read_results  # noqa: E402
from kernelbench_v3.catalog.problem import discover  # noqa: E402


def build_solutions(folder: Path, split: str, limit: int | None) -> int:
    """Copy each problem of the split to `folder/<category>/<name>.py`; returns the count."""
    problems = discover(REPO / "problems", split=split)[:limit]
    for p in problems:
        target = folder / p.category / p.file_name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p.path, target)
    return len(problems)


def run_once(gpus: str, args: argparse.Namespace, solutions: Path, work: Path, budget: float) -> dict:
    tag = "gpus_" + gpus.replace(",", "_")
    run_dir = work / tag
    shutil.rmtree(run_dir, ignore_errors=True)  # a run killed midway starts again, cold
    run_dir.mkdir()
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
        KBV3_CACHE_DIR=str(run_dir / "baseline-cache"),
        TORCHINDUCTOR_CACHE_DIR=str(run_dir / "inductor-cache"),
        TRITON_CACHE_DIR=str(run_dir / "triton-cache"),
        KBV3_MODULE_DIR=str(run_dir / "modules"),
        PYTHONUNBUFFERED="1",
    )
    out = run_dir / "results.parquet"
    command = [
        sys.executable,
        "-m",
        "kernelbench_v3",
        "eval-batch",
        str(solutions),
        "--split",
        args.split,
        "--out",
        str(out),
        "--device",
        args.device,
        "--relax-kernel-check",
        "--timeout",
        str(args.timeout),
        "--shapes",
        args.sizes,
        "--model",
        "reference",
        "--no-progress",
        "--timing-seconds",
        str(args.timing_seconds),
    ]
    if args.device == "cuda":
        command += ["--gpus", gpus]
    else:
        command += ["--workers", str(len(gpus.split(",")))]
    if args.seeds:
        command += ["--seeds", args.seeds]
    if not args.other_shape:
        command.append("--no-other-shape")
    if not args.baseline:
        command.append("--no-baseline")
    print(f"[{tag}] {' '.join(command[1:])}", flush=True)
    started_epoch = time.time()
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, start_new_session=True)
    stopped = False
    try:
        process.wait(timeout=budget)
    except subprocess.TimeoutExpired:
        stopped = True
        os.killpg(process.pid, signal.SIGTERM)  # the batch writes its Parquet on the way out
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    wall = time.monotonic() - started
    records = read_results(out) if out.exists() else []
    statuses = Counter(r.get("status") for r in records)
    busy = sum(r.get("duration_s") or 0.0 for r in records)
    longest = max((r.get("duration_s") or 0.0 for r in records), default=0.0)
    print(f"[{tag}] {len(records)} records in {wall:.1f}s: {dict(statuses)}", flush=True)
    # When each evaluation finished, in seconds since the run started (for equal-work speedups).
    finished = {
        r["problem_id"]: datetime.fromisoformat(r["started_at"]).timestamp()
        + (r.get("duration_s") or 0.0)
        - started_epoch
        for r in records
        if r.get("started_at")
    }
    phases = Counter()
    for r in records:
        phases.update(r.get("phase_s") or {})
    summary = {
        "finished": finished,
        **per_problem(records),
        "gpus": gpus,
        "n_gpus": len(gpus.split(",")),
        "wall_s": wall,
        "records": len(records),
        "statuses": dict(statuses),
        "busy_s": busy,
        "longest_s": longest,
        "stopped": stopped,
        "returncode": process.returncode,
        "mean_phase_s": {k: v / len(records) for k, v in phases.items()} if records else {},
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def per_problem(records: list[dict]) -> dict:
    """Each evaluation's duration and measured solution time, by problem id."""
    return {
        "duration_s": {r["problem_id"]: r.get("duration_s") for r in records},
        "sol_ms": {r["problem_id"]: r.get("sol_ms") for r in records},
    }


def load_summary(work: Path, gpus: str) -> dict | None:
    run_dir = work / ("gpus_" + gpus.replace(",", "_"))
    path = run_dir / "summary.json"
    if not path.exists():
        return None
    summary = json.loads(path.read_text())
    journal = run_dir / "results.parquet.journal.jsonl"
    if "duration_s" not in summary and journal.exists():  # a summary written before per_problem
        summary.update(per_problem(read_journal(journal)[1]))
    return summary


def device_summary() -> str:
    probe = (
        "import torch; n = torch.cuda.device_count(); "
        "print(f'{n} x {torch.cuda.get_device_name(0)}; torch {torch.__version__}' if n else "
        "f'no CUDA device; torch {torch.__version__}')"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    return (result.stdout or result.stderr).strip().splitlines()[-1]


def table(results: list[dict], expected: int, args: argparse.Namespace, device: str) -> str:
    one = results[0] if results[0]["n_gpus"] == 1 else None  # None: the 1-GPU run was not found
    lines = [
        f"# Batch evaluation throughput, split `{args.split}` ({expected} problems, references as solutions)",
        "",
        f"Device: {device}. Settings: sizes={args.sizes}, seeds={args.seeds or 'all five'}, "
        f"second shape={'yes' if args.other_shape else 'no'}, baseline timing={'yes' if args.baseline else 'no'}, timing budget {args.timing_seconds:g} s per timed function, child timeout {args.timeout:.0f}s, "
        "custom-kernel check relaxed, each run cold (own baseline/Inductor/Triton caches).",
        "",
        "| GPUs | wall (s) | records | statuses | evals/min | summed evaluation time (s) | "
        "longest evaluation (s) | mean s per evaluation: reference / candidate child | speedup vs 1 GPU |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        rate = 60.0 * r["records"] / r["wall_s"] if r["wall_s"] else 0.0
        complete = r["records"] == expected and not r["stopped"]
        if one is None:
            speedup = "n/a"
        elif r is one:
            speedup = "1.00x"
        elif complete and one["records"] == expected and not one["stopped"]:
            speedup = f"{one['wall_s'] / r['wall_s']:.2f}x (wall)"
        else:
            one_rate = one["records"] / one["wall_s"] if one["wall_s"] else 0.0
            speedup = f"{(r['records'] / r['wall_s']) / one_rate:.2f}x (throughput)" if one_rate else "n/a"
        status = ", ".join(f"{n} {s}" for s, n in sorted(r["statuses"].items()))
        mean = r.get("mean_phase_s") or {}
        phases = " / ".join(f"{mean[k]:.1f}" if k in mean else "-" for k in ("reference", "candidate"))
        note = "" if complete else " (stopped at budget)" if r["stopped"] else " (incomplete)"
        lines.append(
            f"| {r['gpus']} | {r['wall_s']:.1f}{note} | {r['records']}/{expected} | {status} | "
            f"{rate:.1f} | {r['busy_s']:.1f} | {r['longest_s']:.1f} | {phases} | {speedup} |"
        )
    if one is not None and len(results) > 1:
        best = results[-1]
        common = set(one["finished"]) & set(best["finished"])
        if common:
            t1 = max(one["finished"][p] for p in common)
            tn = max(best["finished"][p] for p in common)
            lines += [
                "",
                f"Equal work: the {len(common)} evaluations both runs finished took "
                f"{t1:.1f}s on 1 GPU and {tn:.1f}s on {best['n_gpus']} (from each run's start "
                f"to the last of them finishing): speedup {t1 / tn:.2f}x.",
            ]
        lines += comparison(one, best, common)
        # With n workers, wall time can't drop below max(total/n, longest single evaluation).
        bound = best["busy_s"] / max(best["busy_s"] / best["n_gpus"], best["longest_s"] or 1e-9)
        lines += [
            "",
            f"Ideal speedup for this workload on {best['n_gpus']} GPUs (summed work over "
            f"max(work/{best['n_gpus']}, longest evaluation)): {bound:.2f}x. Target: >= 1.8x.",
        ]
    return "\n".join(lines) + "\n"


def comparison(one: dict, best: dict, common: set[str]) -> list[str]:
    """What the equal-work speedup is made of: were the same evaluations equally long in both
    runs, how busy the workers of the multi-GPU run were, what one GPU would have taken at the
    multi-GPU run's own evaluation times, and how closely the two runs' GPU timings agree."""
    if "duration_s" not in one or "duration_s" not in best or not common:
        return []
    n = best["n_gpus"]
    d1 = sum(one["duration_s"][p] or 0.0 for p in common)
    dn = sum(best["duration_s"][p] or 0.0 for p in common)
    busy = best["busy_s"] / (n * best["wall_s"])
    gaps = max(one["finished"][p] for p in common) / d1 if d1 else 1.0  # 1-GPU wall per busy second
    lines = [
        "",
        f"Same {len(common)} evaluations, summed durations: {d1:.1f}s in the 1-GPU run, "
        f"{dn:.1f}s in the {n}-GPU run ({d1 / dn:.2f}x; above 1 means each evaluation ran "
        "slower in the 1-GPU run, which inflates the equal-work speedup).",
    ]
    lines.append(
        f"{n}-GPU run: workers busy {100 * busy:.1f}% of its wall time. One GPU doing its "
        f"{best['records']} evaluations at their {n}-GPU-run durations, with the 1-GPU run's "
        f"gaps between evaluations ({100 * (gaps - 1):.1f}%), would take {best['busy_s'] * gaps:.1f}s: "
        f"speedup {best['busy_s'] * gaps / best['wall_s']:.2f}x (a projection, not a measured wall time)."
    )
    timed = [p for p in common if one["sol_ms"].get(p) and best["sol_ms"].get(p)]
    diffs = sorted(
        (abs(one["sol_ms"][p] - best["sol_ms"][p]) / min(one["sol_ms"][p], best["sol_ms"][p]), p) for p in timed
    )
    if diffs:
        worst, problem = diffs[-1]
        lines.append(
            f"Timing agreement between the two runs (same problem, separate processes, "
            f"median solution ms): {len(diffs)} problems, median difference "
            f"{100 * diffs[len(diffs) // 2][0]:.2f}%, largest {100 * worst:.2f}% ({problem}, "
            f"{one['sol_ms'][problem]:.4f} vs {best['sol_ms'][problem]:.4f} ms); "
            f"{sum(d <= 0.01 for d, _ in diffs)}/{len(diffs)} within 1%."
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="h100")
    parser.add_argument("--gpus", default="0,1", help="the multi-GPU run (the single run uses the first)")
    parser.add_argument("--timeout", type=float, default=90.0, help="per child process of an evaluation")
    parser.add_argument("--sizes", default="default", choices=["default", "reduced"])
    parser.add_argument("--seeds", default="42", help="correctness seeds ('' for the evaluator's five)")
    parser.add_argument("--other-shape", action="store_true", help="also check the second shape")
    parser.add_argument(
        "--baseline", action="store_true", help="also time the reference (eager + torch.compile, once per problem)"
    )
    parser.add_argument(
        "--budget", type=float, default=520.0, help="wall seconds for both runs; the one-GPU run may use 62%% of it"
    )
    parser.add_argument(
        "--device",
        default="cuda",
        choices=["cuda", "cpu"],
        help="cpu: a smoke test of this script only (workers instead of GPUs)",
    )
    parser.add_argument(
        "--timing-seconds", type=float, default=2.0, help="timing budget per timed function, passed to eval-batch"
    )
    parser.add_argument(
        "--runs",
        choices=["both", "single", "multi"],
        default="both",
        help="which runs this invocation may do (others are read from --work)",
    )
    parser.add_argument("--limit", type=int, help="only the first N problems (a quick look)")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temp dir, removed)")
    parser.add_argument("--out", type=Path, help="write the markdown table here")
    parser.add_argument(
        "--report-only", action="store_true", help="run nothing: render the table from the summaries in --work"
    )
    parser.add_argument("--device-label", help="the device line of the table (default: probed here)")
    args = parser.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="kbv3-bench-batch-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        solutions = work / "solutions"
        expected = build_solutions(solutions, args.split, args.limit)
        device = args.device_label or device_summary()  # the probe also warms the file cache
        print(f"{expected} solutions; {device}", flush=True)
        first = args.gpus.split(",")[0]
        started = time.monotonic()
        results = []
        single = load_summary(work, first)
        if single is None and args.runs in ("both", "single") and not args.report_only:
            share = 0.62 if args.runs == "both" else 1.0
            single = run_once(first, args, solutions, work, budget=share * args.budget)
        if single is not None:
            results.append(single)
        if args.gpus != first:
            multi = load_summary(work, args.gpus)
            if multi is None and args.runs in ("both", "multi") and not args.report_only:
                left = max(30.0, args.budget - (time.monotonic() - started))
                multi = run_once(args.gpus, args, solutions, work, budget=left)
            if multi is not None:
                results.append(multi)
        if not results:
            print("no run done or found in --work", flush=True)
            return 1
        report = table(results, expected, args, device)
        print(report)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(report)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
