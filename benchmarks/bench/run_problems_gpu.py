"""Run every problem of a split at its DEFAULT shapes on one CUDA GPU (eager, no_grad).

Prints a markdown table (problem, output shape/dtype, eager ms, peak GPU memory) and writes it
to --out. Each problem runs in its own try block, so one failure is reported, not fatal.
Uses only the catalog and the materializer (no `datasets`), so it runs on the device image.

    python benchmarks/bench/run_problems_gpu.py --split h100 --out benchmarks/results/problems_h100.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kernelbench_v3.catalog.materialize import load_module, make_inputs, make_model  # noqa: E402
from kernelbench_v3.catalog.problem import discover  # noqa: E402


def time_eager(model: torch.nn.Module, inputs: list, warmup: int, reps: int) -> list[float]:
    with torch.no_grad():
        for _ in range(warmup):
            model(*inputs)
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(*inputs)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="h100")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()

    device = torch.device("cuda")
    props = torch.cuda.get_device_properties(device)
    header = [
        f"# Problems of split `{args.split}` at default shapes, eager, on {props.name}",
        "",
        f"torch {torch.__version__}, CUDA {torch.version.cuda}; forward under torch.no_grad(), "
        f"{args.warmup} warm-ups, median of {args.reps} CUDA-event timings; seed 0.",
        "",
        "| problem | output shape | dtype | eager ms (median) | peak GPU mem GiB | status |",
        "|---|---|---|---|---|---|",
    ]
    print("\n".join(header), flush=True)
    rows, ok = [], 0
    problems = discover(split=args.split)
    for problem in problems:
        started = time.perf_counter()
        try:
            torch.cuda.reset_peak_memory_stats(device)
            module = load_module(problem)
            model = make_model(module, device, seed=0)
            inputs = make_inputs(module, device, seed=0)
            with torch.no_grad():
                out = model(*inputs)
            times = time_eager(model, inputs, args.warmup, args.reps)
            peak = torch.cuda.max_memory_allocated(device) / 2**30
            row = (
                f"| {problem.problem_id} | {tuple(out.shape)} | {str(out.dtype).removeprefix('torch.')} "
                f"| {statistics.median(times):.4f} | {peak:.2f} | ok |"
            )
            ok += 1
        except Exception as exc:  # report and go on: one problem must not hide the others
            message = f"{type(exc).__name__}: {str(exc).splitlines()[0][:150]}" if str(exc) else type(exc).__name__
            row = f"| {problem.problem_id} | - | - | - | - | FAILED {message} |"
        finally:
            model = inputs = out = None  # noqa: F841
            torch.cuda.empty_cache()
        rows.append(row)
        print(row, f"<!-- {time.perf_counter() - started:.1f}s -->", flush=True)
    footer = ["", f"{ok} of {len(problems)} problems ran."]
    print("\n".join(footer))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(header + rows + footer) + "\n")
    return 0 if ok == len(problems) else 1


if __name__ == "__main__":
    sys.exit(main())
