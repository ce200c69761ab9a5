"""Why does a 12-15 us kernel time 4-5% apart in different processes? A per-buffer look.

The evaluator's 5-run spread for the GELU and softmax solutions (12 and 15 us on an H200) is up
to 5%, in two clusters, while the median's own confidence interval in each run is 0.1-0.2%; the
10th percentile barely moves between runs, the median and 90th do. That fits a per-call mixture
of a fast and a slow state whose share differs from process to process, and where a buffer sits
in memory is one thing that is fixed per process. This script separates the candidates:

- it launches the bundled solution's own Triton kernel directly on NI input buffers x NO output
  buffers (each its own allocation), every (input, output) pair REPS times in shuffled order, with
  the evaluator's timing recipe around each call (`cuda_timing.time_cuda`'s read flush of 2x L2, then
  a spin kernel so host launch gaps are not timed, then CUDA events);
- phase A and phase B time the same buffers twice (if a buffer's figure repeats, it is a property
  of the buffer, not of the moment); phase C times a new set of buffers allocated after a pad;
- per phase it writes one JSON line: the overall median, the mean of the samples between the 10th
  and 90th percentile (a statistic that moves smoothly with a mixture's share, where the median
  jumps), the per-input and per-output medians, and a histogram of the samples.

A second question (`--variants`, commit a8f60f5 ran only `placement`): the evaluator writes 16 MB
right before each flush (the copy of the previous output it keeps for re-checking, the fresh
input blend), and the timing diagnostics that did so (l2_flush_gpu.md, the evaluator's own runs)
spread 4-5% where this grid on clean buffers spread under 2%. If the read flush leaves some of
those dirty lines in L2, the timed kernel pays for writing them back, by an amount that varies.
Each variant times the grid once on the same buffers (`VARIANTS` says what it adds).

Run it in several fresh processes, then `--report`:

    for r in 0 1 2 3; do python benchmarks/diagnostics/diag_placement_gpu.py --out placement.jsonl --run $r; done
    python benchmarks/diagnostics/diag_placement_gpu.py --report placement.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from diag_common import add_run_arguments, read_jsonl, rotated, run_or_report  # noqa: E402

from kernelbench_v3.catalog.materialize import import_file  # noqa: E402

KERNELS = {  # name -> (solution file, kernel attribute)
    "gelu": ("examples/solutions/level1/26_GELU_.py", "gelu_kernel"),
    "softmax": ("examples/solutions/level1/23_Softmax.py", "softmax_kernel"),
}
ROWS, COLS = 256, 16384  # both problems' default sizes (fp32)
# Variant -> (what is written just before the flush, flush passes, flush size in L2 sizes).
VARIANTS = {
    "placement": (None, 1, 2),  # phases A, B (same buffers) and C (new buffers), nothing written
    "clean": (None, 1, 2),
    "dirty": ("scratch", 1, 2),  # 16 MB copied into a scratch buffer, like the evaluator's output copy
    "dirty_flush2": ("scratch", 2, 2),  # ... then the 2x-L2 read flush twice
    "dirty_flush4x": ("scratch", 1, 4),  # ... then one read flush of 4x L2
    "input_written": ("input", 1, 2),  # new values written into the timed input, like the fresh blend
}


def _launcher(name: str):
    import triton

    path, attr = KERNELS[name]
    kernel = getattr(import_file(ROOT / path), attr)
    if name == "gelu":
        n = ROWS * COLS
        return lambda x, y: kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    block = min(triton.next_power_of_2(COLS), 4096)
    return lambda x, y: kernel[(ROWS,)](x, y, COLS, x.stride(0), BLOCK=block)


def trimmed_mean(samples: list[float], lo: float = 0.10, hi: float = 0.90) -> float:
    ordered = sorted(samples)
    a, b = int(lo * len(ordered)), max(int(hi * len(ordered)), int(lo * len(ordered)) + 1)
    return statistics.fmean(ordered[a:b])


def _histogram(samples: list[float], step_ms: float = 0.0002) -> dict[str, int]:
    """Counts per 0.2 us bin between the 1st and 99th percentile (keys: bin start in us)."""
    ordered = sorted(samples)
    lo, hi = ordered[len(ordered) // 100], ordered[-1 - len(ordered) // 100]
    counts: dict[str, int] = {}
    for s in ordered:
        if lo <= s <= hi:
            key = f"{int(s / step_ms) * step_ms * 1e3:.1f}"
            counts[key] = counts.get(key, 0) + 1
    return counts


def time_grid(launch, inputs, outputs, reps: int, seed: int, variant: str = "clean") -> list[tuple[int, int, float]]:
    """(input index, output index, ms) for every pair `reps` times, in shuffled order, each call
    timed the evaluator's way (with what `variant` adds)."""
    import torch

    from kernelbench_v3.evaluate import cuda_timing

    written, passes, scale = VARIANTS[variant]
    flush = torch.empty(cuda_timing.l2_flush_bytes() // 8 * scale, dtype=torch.float32, device="cuda").normal_()
    source = torch.randn(ROWS, COLS, device="cuda")
    scratch = torch.empty_like(source)
    flush_sum = torch.zeros((), dtype=torch.float32, device="cuda")
    cycles_per_ms = cuda_timing._sleep_cycles_per_ms()
    sleep_cycles = int(0.1 * cycles_per_ms)  # 0.1 ms: well above one launch's enqueue time
    order = [(i, j) for i in range(len(inputs)) for j in range(len(outputs))] * reps
    random.Random(seed).shuffle(order)
    rows: list[tuple[int, int, float]] = []
    for chunk in range(0, len(order), 256):
        pending = []
        for i, j in order[chunk : chunk + 256]:
            if written == "scratch":
                scratch.copy_(source)
            elif written == "input":
                inputs[i].copy_(source)
            for _ in range(passes):
                torch.sum(flush, dim=0, out=flush_sum)
            torch.cuda._sleep(sleep_cycles)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            launch(inputs[i], outputs[j])
            end.record()
            pending.append((i, j, start, end))
        torch.cuda.synchronize()
        rows.extend((i, j, s.elapsed_time(e)) for i, j, s, e in pending)
    return rows


def summarize_phase(rows: list[tuple[int, int, float]], n_in: int, n_out: int) -> dict:
    samples = [ms for _, _, ms in rows]
    per_in = [statistics.median(ms for i, _, ms in rows if i == k) for k in range(n_in)]
    per_out = [statistics.median(ms for _, j, ms in rows if j == k) for k in range(n_out)]
    ordered = sorted(samples)
    return {
        "samples": len(samples),
        "median_ms": statistics.median(samples),
        "trimmed_mean_ms": trimmed_mean(samples),
        "p10_ms": ordered[len(ordered) // 10],
        "p90_ms": ordered[len(ordered) * 9 // 10],
        "per_input_median_ms": per_in,
        "per_output_median_ms": per_out,
        "histogram_us": _histogram(samples),
    }


def measure(run: int, kernels: list[str], n_in: int, n_out: int, reps: int, variants: list[str]) -> list[dict]:
    import torch

    from kernelbench_v3.evaluate import cuda_timing

    rows = []
    for name in kernels:
        launch = _launcher(name)

        def buffers(count: int) -> list:
            return [torch.randn(ROWS, COLS, device="cuda") for _ in range(count)]

        inputs, outputs = buffers(n_in), buffers(n_out)
        cuda_timing._keep_calling(lambda a: launch(*a), [(inputs[0], outputs[0])], 1.0)  # noqa: B023 (warm-up, clocks up)
        modes = rotated(variants, run)
        phases = [(v, p) for v in modes for p in (("A", "B", "C") if v == "placement" else ("-",))]
        for variant, phase in phases:
            if phase == "C":  # new buffers, placed after a pad so they cannot reuse A/B's blocks
                pad = torch.empty(int(97e6) // 4 * (run + 1), device="cuda")  # noqa: F841 (held)
                inputs, outputs = buffers(n_in), buffers(n_out)
            clock_before = cuda_timing._sleep_cycles_per_ms() / 1e3
            grid = time_grid(launch, inputs, outputs, reps, seed=run * 10 + ord(phase), variant=variant)
            row = {
                "run": run,
                "kernel": name,
                "variant": variant,
                "phase": phase,
                "inputs": n_in,
                "outputs": n_out,
                "reps": reps,
                "sm_clock_mhz": [round(clock_before, 1), round(cuda_timing._sleep_cycles_per_ms() / 1e3, 1)],
                "input_ptr_mod_2mib": [x.data_ptr() % (2 << 20) for x in inputs],
                **summarize_phase(grid, n_in, n_out),
            }
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k not in ("histogram_us",)}), flush=True)
    return rows


def _spread(values: list[float]) -> float:
    return (max(values) - min(values)) / min(values)


def _pearson(a: list[float], b: list[float]) -> float:
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    num = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    den = (sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b)) ** 0.5
    return num / den if den else float("nan")


def report(path: Path) -> str:
    rows = read_jsonl(path)
    for r in rows:
        r.setdefault("variant", "placement")  # commit a8f60f5 ran only the placement phases
    lines = [
        "| kernel | variant | run | phase | median ms | trimmed mean ms (p10-p90) | p10 / p90 ms | "
        "per-input medians: spread | per-output medians: spread | SM MHz |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["kernel"], list(VARIANTS).index(r["variant"]), r["run"])):
        lines.append(
            f"| {r['kernel']} | {r['variant']} | {r['run']} | {r['phase']} | {r['median_ms']:.5f} | "
            f"{r['trimmed_mean_ms']:.5f} | {r['p10_ms']:.5f} / {r['p90_ms']:.5f} | "
            f"{_spread(r['per_input_median_ms']):.2%} | {_spread(r['per_output_median_ms']):.2%} | "
            f"{r['sm_clock_mhz'][0]:.0f}-{r['sm_clock_mhz'][1]:.0f} |"
        )
    lines += [
        "",
        "| kernel | variant | runs x phases | mean of medians ms | spread of medians | spread of trimmed means | "
        "per-input medians, A vs B (same buffers): Pearson r | per-output, A vs B: r |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kernel in dict.fromkeys(r["kernel"] for r in rows):
        for variant in VARIANTS:
            picked = [r for r in rows if r["kernel"] == kernel and r["variant"] == variant]
            if not picked:
                continue
            by_run: dict = {}
            for r in picked:
                by_run.setdefault(r["run"], {})[r["phase"]] = r
            pairs = [p for p in by_run.values() if "A" in p and "B" in p]
            r_in = [_pearson(p["A"]["per_input_median_ms"], p["B"]["per_input_median_ms"]) for p in pairs]
            r_out = [_pearson(p["A"]["per_output_median_ms"], p["B"]["per_output_median_ms"]) for p in pairs]
            lines.append(
                f"| {kernel} | {variant} | {len(picked)} | {statistics.fmean(r['median_ms'] for r in picked):.5f} | "
                f"{_spread([r['median_ms'] for r in picked]):.2%} | "
                f"{_spread([r['trimmed_mean_ms'] for r in picked]):.2%} | "
                f"{', '.join(f'{v:.2f}' for v in r_in) or '-'} | {', '.join(f'{v:.2f}' for v in r_out) or '-'} |"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(parser, VARIANTS, default="placement")
    parser.add_argument("--kernels", default=",".join(KERNELS))
    parser.add_argument("--inputs", type=int, default=8)
    parser.add_argument("--outputs", type=int, default=8)
    parser.add_argument("--reps", type=int, default=30, help="timed calls per (input, output) pair per phase")
    args = parser.parse_args()
    return run_or_report(
        parser,
        args,
        report,
        known=VARIANTS,
        measure=lambda variants: measure(
            args.run, args.kernels.split(","), args.inputs, args.outputs, args.reps, variants
        ),
    )


if __name__ == "__main__":
    sys.exit(main())
