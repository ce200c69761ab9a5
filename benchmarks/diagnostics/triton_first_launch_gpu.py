"""Where a solution's first Triton launch spends its seconds, in a process forked like a solution
process (issue 42: `solution_cases` was 1.1-2.3 s for Triton solutions, 0.2-0.3 s for PyTorch).

A parent imports torch and Triton as the zygote does (`zygote.import_warm`, never CUDA) and, for
each solution and way, forks a child with a Triton cache of its own that opens CUDA, builds the
model and its inputs, then times the first forward (synchronized) and a second one. Inside the
first forward it times each C build of Triton's runtime (`compile_module_from_src`: the driver
helper `cuda_utils` and a launcher per kernel signature) and each kernel compile
(`triton.compiler.compile`: MLIR, LLVM, ptxas). Ways:

- `fresh`: an empty Triton cache and none of Triton's per-process memos, as every solution
  process had before the seed;
- `seeded_unwarmed`: the cache holds a copy of the driver helper built by trusted code
  (`solution.triton_seed`), the memos cleared (as a solution process got at 9446fb9);
- `seeded`: that copy, and the memos the zygote computed (`compile_memos.warm_triton`: the hash of
  libtriton that keys the cache, libcuda's folder, ptxas), as a solution process now gets;
- `warm`: the cache of a previous child of the same solution (what a per-source cache would give;
  measured for the comparison only, the evaluator keeps no such cache).

    PYTHONPATH=. python3 benchmarks/diagnostics/triton_first_launch_gpu.py --out /tmp/first.jsonl

Prints one JSON line per child and a median table per way.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks" / "bench"))

import bench_calls_gpu as calls  # noqa: E402  (how a bench builds a solution's model)

SOLUTIONS = (
    "level1/26_GELU_=examples/solutions/level1/26_GELU_.py",
    "level1/23_Softmax=examples/solutions/level1/23_Softmax.py",
    "level2/86_Matmul_Divide_GELU=examples/solutions/level2/86_Matmul_Divide_GELU.py",
    "level1/40_LayerNorm=examples/solutions/level1/40_LayerNorm.py",
)
WAYS = ("fresh", "seeded_unwarmed", "seeded", "warm")
UNWARMED = ("fresh", "seeded_unwarmed")  # the child clears the memos it inherited


def _clear_memos() -> None:
    """Forget what the parent's `compile_memos.warm_triton` computed, as a process that inherited none."""
    from triton.backends.nvidia.driver import libcuda_dirs
    from triton.knobs import NvidiaTool
    from triton.runtime.cache import triton_key

    for memo in (triton_key, libcuda_dirs, NvidiaTool.from_path):
        memo.cache_clear()


def _child(problem_id: str, solution: Path, cache: Path, unwarmed: bool = False) -> dict:
    """In the forked child: the first and second forward, with the builds inside the first."""
    os.environ["TRITON_CACHE_DIR"] = str(cache)
    if unwarmed:
        _clear_memos()
    import torch
    import triton.compiler.compiler as triton_compiler
    import triton.runtime.build as triton_build

    from kernelbench_v3.catalog.materialize import load_module
    from kernelbench_v3.catalog.problem import get_problem

    builds: list[tuple[str, float]] = []

    def timed(fn, into, name_of):
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                into.append((name_of(args, kwargs), time.perf_counter() - started))

        return wrapper

    compile_pairs: list[tuple[str, float]] = []
    real_build, real_compile = triton_build.compile_module_from_src, triton_compiler.compile
    named = timed(real_build, builds, lambda a, k: str(k.get("name") or (a[1] if len(a) > 1 else "?")))
    # Triton's driver imported the build function by name: patch it where it is called from.
    import triton.backends.nvidia.driver as nvidia_driver

    nvidia_driver.compile_module_from_src = named
    triton_build.compile_module_from_src = named
    # A kernel's first run takes `compile` from the package (`JITFunction.create_binder`).
    import triton.compiler as triton_compiler_package

    triton_compiler.compile = triton_compiler_package.compile = timed(
        real_compile, compile_pairs, lambda a, k: "kernel"
    )

    steps: dict[str, float] = {}
    started = time.perf_counter()
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    steps["cuda_context_s"] = time.perf_counter() - started
    started = time.perf_counter()
    module = load_module(get_problem(problem_id).path, {})
    model, _ = calls._solution_model(solution, module, "cuda")
    with torch.device("cuda"):
        inputs = list(module.get_inputs())
    torch.cuda.synchronize()
    steps["setup_s"] = time.perf_counter() - started
    with torch.no_grad():
        started = time.perf_counter()
        model(*inputs)
        torch.cuda.synchronize()
        steps["first_forward_s"] = time.perf_counter() - started
        started = time.perf_counter()
        model(*inputs)
        torch.cuda.synchronize()
        steps["second_forward_s"] = time.perf_counter() - started
    compiles = [s for _, s in compile_pairs]
    steps["c_builds_s"] = sum(s for _, s in builds)
    steps["kernel_compiles_s"] = sum(compiles)
    steps["rest_of_first_s"] = steps["first_forward_s"] - steps["c_builds_s"] - steps["kernel_compiles_s"]
    return {**steps, "builds": builds, "kernel_compiles": len(compiles)}


def run_one(problem_id: str, solution: Path, cache: Path, unwarmed: bool = False) -> dict:
    """Fork, run `_child`, and read its JSON line back (the parent never opens CUDA)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            result = _child(problem_id, solution, cache, unwarmed)
        except BaseException as exc:  # noqa: BLE001
            result = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        os.write(write_fd, json.dumps(result).encode())
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(data or b'{"error": "the child wrote nothing"}')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/kbv3-first-launch.jsonl"))
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--solutions", default=",".join(SOLUTIONS), help="PROBLEM=PATH,...")
    args = parser.parse_args()

    from kernelbench_v3.evaluate import compile_memos
    from kernelbench_v3.evaluate.solution import triton_seed
    from kernelbench_v3.evaluate.solution.zygote import import_warm

    import_warm()  # what a forked solution process inherits
    _clear_memos()  # and once more, to time what the zygote now spends on them
    started = time.perf_counter()
    missed = compile_memos.warm_triton()
    print(json.dumps({"warm_triton_s": round(time.perf_counter() - started, 3), "missed": missed}), flush=True)
    root = Path(tempfile.mkdtemp(prefix="kbv3-first-launch-"))
    started = time.perf_counter()
    seed = triton_seed.ensure_seed(triton_seed.seed_folder(root))
    seed_build_s = time.perf_counter() - started
    print(json.dumps({"seed": str(seed), "seed_build_s": round(seed_build_s, 3)}), flush=True)
    rows: list[dict] = []
    with open(args.out, "a") as journal:
        for spec in args.solutions.split(","):
            problem_id, path = spec.split("=", 1)
            warm_cache = root / f"warm-{len(rows)}"
            for run in range(args.runs):
                for way in WAYS:
                    cache = warm_cache if way == "warm" else root / f"{way}-{len(rows)}"
                    if way.startswith("seeded") and not triton_seed.copy_seed(seed, cache):
                        continue
                    if way == "warm" and not cache.exists():
                        run_one(problem_id, REPO / path, cache)  # fills it; not a measurement
                    measured = run_one(problem_id, REPO / path, cache, unwarmed=way in UNWARMED)
                    row = {"problem": problem_id, "way": way, "run": run, **measured}
                    row["at"] = time.strftime("%H:%M:%S")
                    rows.append(row)
                    journal.write(json.dumps(row) + "\n")
                    journal.flush()
                    print(json.dumps(row)[:400], flush=True)
    shutil.rmtree(root, ignore_errors=True)
    keys = (
        "cuda_context_s",
        "first_forward_s",
        "c_builds_s",
        "kernel_compiles_s",
        "rest_of_first_s",
        "second_forward_s",
    )
    print("\n| problem | way | n | " + " | ".join(keys) + " |")
    print("|---|---|---|" + "---|" * len(keys))
    for problem_id in dict.fromkeys(r["problem"] for r in rows):
        for way in WAYS:
            mine = [r for r in rows if r["problem"] == problem_id and r["way"] == way and "error" not in r]
            if mine:
                cells = [f"{statistics.median(r[k] for r in mine):.3f}" for k in keys]
                print(f"| {problem_id} | {way} | {len(mine)} | " + " | ".join(cells) + " |")
    errors = [r for r in rows if "error" in r]
    for r in errors:
        print(f"error: {r['problem']} {r['way']}: {r['error']}")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
