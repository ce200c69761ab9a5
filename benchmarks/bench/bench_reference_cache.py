"""The reference cache on CPU: seconds to compute a problem's reference without the cache, on a
miss (compute and store) and on a hit, for a few problems at their reduced sizes.

    python benchmarks/bench/bench_reference_cache.py > benchmarks/results/reference_cache_cpu.txt

A hit still rebuilds the models and inputs and runs every case's native forward (expected outputs
are never cached); it skips the profiled pass, the second-shape search and the float64 runs.
"""

from __future__ import annotations

import hashlib
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from kernelbench_v3.catalog.problem import default_problems_dir, get_problem
from kernelbench_v3.evaluate.cases import plan_cases
from kernelbench_v3.evaluate.request import DEFAULT_SEEDS
from kernelbench_v3.evaluate.supervisor.reference import compute
from kernelbench_v3.evaluate.supervisor.reference.cache import ReferenceCache, key_fields

PROBLEMS = [
    "level1/1_Square_matrix_multiplication_",
    "level1/40_LayerNorm",
    "level2/86_Matmul_Divide_GELU",
]
REPEATS = 3


def main() -> None:
    plan = plan_cases(DEFAULT_SEEDS, other_shape=True)
    print(
        f"# reference cache, CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads), median of {REPEATS}"
    )
    print(f"{'problem':42s} {'sizes':58s} {'no cache s':>10s} {'miss s':>8s} {'hit s':>8s} {'saved':>6s}")
    for problem_id in PROBLEMS:
        problem = get_problem(problem_id, default_problems_dir())
        source = problem.path.read_text(encoding="utf-8")
        sizes = problem.reduced
        sha = hashlib.sha256(source.encode()).hexdigest()
        compute(problem, source, sizes, "cpu", plan)  # warm-up: imports, first-call costs
        plain, miss, hit = [], [], []
        for _ in range(REPEATS):
            with tempfile.TemporaryDirectory() as root:
                cache = ReferenceCache(Path(root), key_fields(sha, sizes, "cpu", plan, 2))
                for bucket, use in ((plain, None), (miss, cache), (hit, cache)):
                    started = time.perf_counter()
                    run = compute(problem, source, sizes, "cpu", plan, use)
                    bucket.append(time.perf_counter() - started)
                assert run.cached is True, problem_id
        p, m, h = (statistics.median(x) for x in (plain, miss, hit))
        print(f"{problem_id:42s} {str(dict(sizes)):58s} {p:10.3f} {m:8.3f} {h:8.3f} {1 - h / p:6.0%}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
