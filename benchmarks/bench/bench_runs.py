"""Benchmark: load + validate + join + roofline + every anomaly flag on 2071 synthetic runs.

Generates a runs table the size of the published one (2071 rows, published schema, every GPU,
every catalog problem of each split, ~65% correct with a solution source each, a few planted
anomalies) in a temp folder, then times `load_runs` (CSV parse, validation, normalisation,
solution files) and `join_runs` + `add_roofline` + `flag_anomalies`. The per-problem facts
(reference precision, near-identity) are computed once beforehand and cached; their one-off
cost is printed separately. Target: join + all flags under 1 s.

    python benchmarks/bench/bench_runs.py [--problems DIR]
"""

from __future__ import annotations

import argparse
import csv
import platform
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from kernelbench_v3.catalog.problem import discover
from kernelbench_v3.runs.anomalies import flag_anomalies
from kernelbench_v3.runs.facts import facts_table
from kernelbench_v3.runs.leaderboard import leaderboard
from kernelbench_v3.runs.load import join_runs, load_runs
from kernelbench_v3.runs.solution_files import solution_file_name
from kernelbench_v3.runs.speed_of_light import add_roofline
from kernelbench_v3.vocab import PUBLISHED_RUNS_COLUMNS, SPLIT_OF_RUNS_GPU

N_ROWS = 2071
TRITON_SOLUTION = """import torch, triton, triton.language as tl
@triton.jit
def kernel_{i}(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        kernel_{i}[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
"""
TORCH_SOLUTION = """import torch
class ModelNew(torch.nn.Module):
    def forward(self, a, b):  # variant {i}
        return torch.matmul(a.bfloat16(), b.bfloat16()).float()
"""


def synthesize(folder: Path, problems, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    (folder / "solutions").mkdir(parents=True)
    models = [f"Model {i}" for i in range(14)] + ["Model_With_Underscores v2"]
    cells = [
        (m, gpu, p) for gpu, split in SPLIT_OF_RUNS_GPU.items() for p in problems if split in p.gpus for m in models
    ]
    rng.shuffle(cells)
    rows = []
    for i, (model, gpu, p) in enumerate(cells[:N_ROWS]):
        compiled = rng.random() < 0.85
        correct = compiled and rng.random() < 0.77
        ref = float(rng.lognormal(0, 1.5))
        speedup = float(rng.lognormal(0, 0.5)) if correct else None
        if correct and rng.random() < 0.02:
            speedup *= 50  # planted reward hacks
        level = p.level if p.category.startswith("level") else 1  # as published
        rows.append(
            {
                "model": model,
                "gpu": gpu,
                "level": level,
                "problem": p.file_name,
                "compiled": compiled,
                "correct": correct,
                "speedup": speedup,
                "ref_ms": ref if correct else None,
                "sol_ms": ref / speedup if correct else None,
                "turns": int(rng.integers(1, 16)),
                "total_tokens": int(rng.integers(0, 400_000)),
                "estimated_cost_usd": round(float(rng.uniform(0.005, 0.3)), 6),
                "op_type": p.op_type,
                "baseline_type": rng.choice(["pytorch", "pytorch_eager", "torch_compile"]),
                "precision_used": rng.choice(["fp32"] * 8 + ["bf16", "fp16"]) if compiled else "",
                "run_dir": f"run_{gpu}",
                "baseline_link": f"/data/kernelbench-v3/references/{p.file_name}",
                "solution_link": f"/data/kernelbench-v3/solutions/{solution_file_name(model, gpu, p.file_name)}"
                if correct
                else "",
            }
        )
        if correct:
            body = (TORCH_SOLUTION if rng.random() < 0.1 else TRITON_SOLUTION).format(i=i)
            (folder / "solutions" / solution_file_name(model, gpu, p.file_name)).write_text(body)
    with open(folder / "results.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, PUBLISHED_RUNS_COLUMNS)
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in rows)


def best_of(fn, repeats: int = 5):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), float(np.median(times)), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=Path)
    args = parser.parse_args()
    problems = discover(args.problems)
    start = time.perf_counter()
    facts = facts_table(problems)
    facts_s = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        synthesize(folder, problems)
        load_min, load_med, runs = best_of(lambda: load_runs(folder, problems=problems, solutions=True))

        def join_and_flag():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                joined = add_roofline(join_runs(runs, problems, facts))
            return joined, flag_anomalies(joined)

        from kernelbench_v3.runs.solution_scan import scan_source

        join_and_flag()  # imports (torch via roofline) and pandas warm-up are not the join's cost
        scan_source.cache_clear()
        cold_s = time.perf_counter()
        joined, flags = join_and_flag()
        cold_s = time.perf_counter() - cold_s
        flag_min, flag_med, (joined, flags) = best_of(join_and_flag)
        board_min, _, board = best_of(lambda: leaderboard(joined, problems))
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}")
    print(
        f"rows: {len(runs)} ({int(runs['correct'].sum())} correct, "
        f"{int(runs['solution_source'].notna().sum())} solution sources), problems: {len(problems)}"
    )
    print(f"problem facts (one-off, cached afterwards): {facts_s:.2f} s")
    print(
        f"load_runs (CSV + validation + normalisation + solution files): min {load_min:.3f} s, median {load_med:.3f} s"
    )
    print(f"join + roofline + all flags, cold solution-scan cache (every source scanned): {cold_s:.3f} s")
    print(f"join + roofline + all flags, warm: min {flag_min:.3f} s, median {flag_med:.3f} s (target < 1 s)")
    print(f"leaderboard: {board_min * 1e3:.1f} ms ({len(board)} rows)")
    print("flags: " + ", ".join(f"{k} {v}" for k, v in flags["flag"].value_counts().items()))
    print(f"unmatched rows: {int((~joined['matched']).sum())}")


if __name__ == "__main__":
    main()
