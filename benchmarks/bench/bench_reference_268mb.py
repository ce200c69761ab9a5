"""The reference phase of the 268 MB-input problems on CPU, at their default sizes (issue 34).

level1/36_RMSNorm_ and level1/40_LayerNorm take one 16x64x256x256 fp32 input (268 MB). For each,
this times what the supervisor's reference phase does (`reference.compute`) with the reference
cache off, on a miss (an empty cache: compute and store) and on a hit, and the comparison of
every case's output with the reference (`checks.compare_case`, which the verdict and the
check before timing run once each), then prints a cProfile summary of one miss and one hit:

    python benchmarks/bench/bench_reference_268mb.py > benchmarks/results/reference_268mb_cpu.md

The GPU evaluation keeps the reference's inputs and expected outputs on the host too, so most of
what costs here (hashing, host copies, float64 arithmetic, extra forwards) costs there as well.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import io
import json
import os
import platform
import pstats
import resource
import tempfile
import time
from pathlib import Path

import torch

from kernelbench_v3.catalog.problem import default_problems_dir, get_problem
from kernelbench_v3.evaluate.cases import plan_cases
from kernelbench_v3.evaluate.record import SCHEMA_VERSION
from kernelbench_v3.evaluate.request import DEFAULT_SEEDS
from kernelbench_v3.evaluate.supervisor.reference import compute
from kernelbench_v3.evaluate.supervisor.reference.cache import ReferenceCache, key_fields
from kernelbench_v3.evaluate.supervisor.verdict.compare import calibrate_strict, compare_case

PROBLEMS = ["level1/36_RMSNorm_", "level1/40_LayerNorm"]
TOP = 18  # lines of each profile


def _compare_all(run) -> float:
    """Seconds to compare every case's output (the expected one, slightly perturbed) with the
    reference under the default tolerance, as the verdict does."""
    calibrated = calibrate_strict(run.entries())
    started = time.perf_counter()
    for name, case in run.cases.items():
        out = case.saved["expected"].clone()
        out.view(-1)[::7] += 1e-6  # an honest solution's rounding differences, not bit-equal
        verdict = compare_case(name, case.case.group, out, case.saved, case.entry, "v3", run.precision, calibrated)
        assert not verdict.failures, verdict.failures
    return time.perf_counter() - started


def _profile(fn, *args) -> tuple[object, str]:
    prof = cProfile.Profile()
    result = prof.runcall(fn, *args)
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(TOP)
    lines = [ln for ln in text.getvalue().splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls"))
    total = next(ln for ln in lines if "function calls" in ln).strip()
    return result, "\n".join([total, *lines[start:]])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", default=",".join(PROBLEMS))
    ap.add_argument("--sizes", default="", help="JSON size overrides (default: the problem's defaults)")
    ap.add_argument("--no-profile", action="store_true")
    args = ap.parse_args()
    sizes = json.loads(args.sizes) if args.sizes else {}
    plan = plan_cases(DEFAULT_SEEDS, other_shape=True)
    print(
        f"# reference phase of the 268 MB problems, CPU ({platform.machine()}, {os.cpu_count()} cores, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads); load average before: "
        f"{os.getloadavg()[0]:.2f}; sizes {sizes or 'default'}; {len(plan)} cases\n"
    )
    print("| problem | no cache s | miss s | hit s | compare all cases s |")
    print("|---|---|---|---|---|")
    profiles = []
    for problem_id in args.problems.split(","):
        problem = get_problem(problem_id, default_problems_dir())
        source = problem.path.read_text(encoding="utf-8")
        fields = key_fields(hashlib.sha256(source.encode()).hexdigest(), sizes, "cpu", plan, SCHEMA_VERSION)
        with tempfile.TemporaryDirectory() as root:
            cache = ReferenceCache(Path(root), fields)
            figures = []
            for use in (None, cache, cache):
                gc.collect()
                started = time.perf_counter()
                run = compute(problem, source, sizes, "cpu", plan, use)
                figures.append(time.perf_counter() - started)
                del run
            assert cache.path.exists()
            run = compute(problem, source, sizes, "cpu", plan, cache)
            compare = _compare_all(run)
            del run
            gc.collect()
            if not args.no_profile:
                cache.path.unlink()
                for label in ("miss", "hit"):
                    run, text = _profile(compute, problem, source, sizes, "cpu", plan, cache)
                    assert run.cached is (label == "hit"), (problem_id, label, run.cached)
                    profiles.append((f"{problem_id}, {label}", text))
                    del run
                    gc.collect()
        print(f"| {problem_id} | {figures[0]:.2f} | {figures[1]:.2f} | {figures[2]:.2f} | {compare:.2f} |", flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20)
    print(f"\npeak resident memory of the process: {peak:.1f} GiB")
    for label, text in profiles:
        print(f"\n## cProfile, {label} (top {TOP} by own time)\n\n```\n{text}\n```")


if __name__ == "__main__":
    main()
