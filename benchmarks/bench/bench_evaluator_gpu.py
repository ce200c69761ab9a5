"""GPU benchmark of the evaluator: baselines for a whole split, honest and cheating solutions
through the real evaluator, and timing fidelity across separate evaluator runs.

Parts (`--part`: all (default), report (tables only), or a comma list; run in this order):
  baselines  eager ms, torch.compile(mode="reduce-overhead") ms, baseline (the faster), the
             roofline speed-of-light ms on --gpu and baseline/SOL, for every problem of --split
             at default shapes (each problem capped by --cap seconds);
  solutions  the bundled honest Triton solutions and the cheat fixtures on h100-split problems:
             verdict, failed check, solution ms, speedup;
  fidelity   the same solution evaluated in --runs separate evaluator runs (fresh processes):
             spread (max-min)/min of the reported medians per problem, and the maximum.

Resumable and chunkable: every finished item is appended to `<out>.jsonl` and skipped when the
command is run again; `--budget` stops starting new items after that many seconds, so a part that
does not fit one ~9-minute call finishes over several. Markdown tables of everything in the
journal are (re)written to `--out` after each item. `--device cpu` rehearses every code path on a
CPU (reduced sizes, Triton interpreter). Needs torch and triton only (no `datasets`).

    python benchmarks/bench/bench_evaluator_gpu.py --out benchmarks/results/evaluator_gpu.md --budget 480
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kernelbench_v3.catalog.problem import discover  # noqa: E402
from kernelbench_v3.evaluate import EvalRequest, evaluate  # noqa: E402
from kernelbench_v3.evaluate.fingerprint import device_name, software  # noqa: E402
from kernelbench_v3.evaluate.supervisor.reference.baseline import get_baseline  # noqa: E402
from kernelbench_v3.evaluate.supervisor.verdict import problem_speed_of_light_ms  # noqa: E402

EXAMPLES = ROOT / "examples" / "solutions"
CHEATS = ROOT / "tests" / "solutions" / "cheats"
HONEST = [
    ("level1/23_Softmax", EXAMPLES / "level1/23_Softmax.py"),
    ("level1/26_GELU_", EXAMPLES / "level1/26_GELU_.py"),
    ("level1/1_Square_matrix_multiplication_", EXAMPLES / "level1/1_Square_matrix_multiplication_.py"),
    ("level1/40_LayerNorm", EXAMPLES / "level1/40_LayerNorm.py"),
    ("level2/86_Matmul_Divide_GELU", EXAMPLES / "level2/86_Matmul_Divide_GELU.py"),
    ("tile_specialized/gemm_bias_relu", EXAMPLES / "tile_specialized/gemm_bias_relu.py"),
]
CHEATING = [
    ("level1/40_LayerNorm", CHEATS / "near_identity_layernorm.py"),
    ("level1/40_LayerNorm", CHEATS / "weights_dropped.py"),
    ("level1/23_Softmax", CHEATS / "pure_torch.py"),
    ("level2/86_Matmul_Divide_GELU", CHEATS / "precision_downcast.py"),
    ("level1/23_Softmax", CHEATS / "pointer_cache.py"),
    ("level1/23_Softmax", CHEATS / "content_cache.py"),
    ("level1/23_Softmax", CHEATS / "content_hash_cache.py"),
    ("level1/23_Softmax", CHEATS / "monkeypatch_torch.py"),
]
FIDELITY = [HONEST[0], HONEST[1], HONEST[2], HONEST[4]]


def _fmt(value, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def _clock_text(row: dict) -> str:
    """'1925-1943' (SM MHz before and after timing), '(retimed)' when the clock moved; '-' if unknown."""
    before, after = (row.get("sm_clock_mhz") or [None, None])[:2]
    if before is None:
        return "-"
    return f"{_fmt(before)}-{_fmt(after)}" + (" (retimed)" if row.get("clock_retry") else "")


class Journal:
    def __init__(self, path: Path):
        self.path = path
        self.rows: list[dict] = []
        self.lock = threading.Lock()
        if path.exists():
            self.rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def done(self, part: str, key: str) -> bool:
        return any(r["part"] == part and r["key"] == key for r in self.rows)

    def add(self, row: dict) -> None:
        with self.lock:
            self.rows.append(row)
            with self.path.open("a") as f:
                f.write(json.dumps(row) + "\n")

    def part(self, name: str) -> list[dict]:
        return [r for r in self.rows if r["part"] == name]


def run_baselines(args, journal: Journal, deadline: float) -> None:
    problems = discover(args.problems_dir, split=args.split)
    if args.problems:
        problems = [p for p in problems if p.problem_id in args.problems]
    name = device_name(args.device)
    todo = [
        p
        for p in problems
        if not journal.done("baselines", p.problem_id) and not (args.device == "cpu" and p.cpu_unsupported)
    ]
    lock = str(Path(str(args.out) + ".timing.lock"))

    def one(problem):
        if time.monotonic() > deadline:
            return
        sizes = problem.reduced if args.device == "cpu" else {}
        spec = {
            "device": args.device,
            "problem_path": str(problem.path),
            "sizes": sizes,
            "seeds": [42, 123, 456, 789],
            "timing_seconds": args.timing_seconds,
            "compile": not args.no_compile,
            "timing_lock": lock,
        }
        started = time.monotonic()
        base = get_baseline(
            spec, problem_sha256=problem.sha256, device_name=name, cache_dir=args.cache, timeout_s=args.cap
        )
        sol = (
            problem_speed_of_light_ms(problem.problem_id, args.gpu, base.get("precision") or "fp32")
            if not sizes
            else None
        )
        journal.add(
            {
                "part": "baselines",
                "key": problem.problem_id,
                "eager_ms": base.get("eager_ms"),
                "compiled_ms": base.get("compiled_ms"),
                "baseline_ms": base.get("baseline_ms"),
                "baseline_type": base.get("baseline_type"),
                "precision": base.get("precision"),
                "sol_ms": sol,
                "error": base.get("error") or base.get("compile_error"),
                "seconds": round(time.monotonic() - started, 1),
                "eager_cv": (base.get("eager") or {}).get("cv"),
                "compiled_cv": (base.get("compiled") or {}).get("cv"),
            }
        )
        write_report(args, journal)

    # Several problems at once: they compile in parallel and take turns on the GPU for timing.
    with ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
        list(pool.map(one, todo))


def _request(args, problem_id: str, path: Path, **options) -> EvalRequest:
    return EvalRequest(problem_id, path, gpu=args.gpu, device=args.device, timeout_s=args.cap, **options)


def run_solutions(args, journal: Journal, deadline: float) -> None:
    for kind, items in (("honest", HONEST), ("cheat", CHEATING)):
        for problem_id, path in items:
            key = f"{problem_id}:{path.name}"
            if journal.done("solutions", key) or time.monotonic() > deadline:
                continue
            rec = evaluate(
                _request(args, problem_id, path, baseline=not args.no_baseline_in_solutions), cache_dir=args.cache
            )
            journal.add(
                {
                    "part": "solutions",
                    "key": key,
                    "kind": kind,
                    "problem": problem_id,
                    "solution": path.name,
                    "status": rec.status,
                    "failed_check": rec.failed_check,
                    "sol_ms": rec.sol_ms,
                    "cv": rec.sol_cv,
                    "baseline_ms": rec.baseline_ms,
                    "baseline_type": rec.baseline_type,
                    "speedup": rec.speedup,
                    "sol_fraction": rec.sol_fraction,
                    "flags": rec.timing_flags,
                    "kernels": rec.kernel_names[:4],
                    "seconds": rec.duration_s,
                    "error": (rec.error or "")[:200],
                }
            )
            write_report(args, journal)


def run_fidelity(args, journal: Journal, deadline: float) -> None:
    # Run-major order: the runs of one problem are minutes apart, not back to back, and a budget
    # that runs out leaves every problem with the same number of runs.
    for run in range(args.runs):
        for problem_id, path in FIDELITY:
            if args.problems and problem_id not in args.problems:
                continue
            key = f"{problem_id}:{run}"
            if journal.done("fidelity", key) or time.monotonic() > deadline:
                continue
            rec = evaluate(
                _request(args, problem_id, path, seeds=(42, 123, 456, 789), other_shape=False, baseline=False),
                cache_dir=args.cache,
            )
            details = rec.timing_details
            journal.add(
                {
                    "part": "fidelity",
                    "key": key,
                    "problem": problem_id,
                    "run": run,
                    "sol_ms": rec.sol_ms,
                    "cv": rec.sol_cv,
                    "reps": rec.sol_reps,
                    "status": rec.status,
                    "flags": rec.timing_flags,
                    "median_ci_rel": details.get("median_ci_rel"),
                    "fresh_buffers": details.get("fresh_buffers"),
                    "sm_clock_mhz": [details.get("sm_clock_mhz_before"), details.get("sm_clock_mhz_after")],
                    "clock_retry": details.get("clock_retry"),
                }
            )
            write_report(args, journal)


def write_report(args, journal: Journal) -> str:
    with journal.lock:
        return _write_report(args, journal)


def _write_report(args, journal: Journal) -> str:
    fp = software()
    lines = [
        f"# Evaluator benchmark ({args.device}, {device_name(args.device)})",
        "",
        f"torch {fp['torch']}, triton {fp.get('triton')}, CUDA {fp.get('cuda_runtime')}; "
        f"speed of light for `{args.gpu}`; split `{args.split}`.",
        "",
    ]
    rows = journal.part("baselines")
    if rows:
        lines += [
            "## Baselines (default shapes)",
            "",
            "| problem | eager ms | compiled ms | baseline ms | baseline | SOL ms | baseline/SOL | note |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            ratio = r["baseline_ms"] / r["sol_ms"] if r.get("baseline_ms") and r.get("sol_ms") else None
            lines.append(
                f"| {r['key']} | {_fmt(r['eager_ms'])} | {_fmt(r['compiled_ms'])} | {_fmt(r['baseline_ms'])} | "
                f"{_fmt(r['baseline_type'])} | {_fmt(r['sol_ms'])} | {_fmt(ratio, 3)} | {(r.get('error') or '')[:80]} |"
            )
        lines.append("")
    rows = journal.part("solutions")
    if rows:
        lines += [
            "## Solutions through the evaluator",
            "",
            "| kind | problem | solution | status | failed check | sol ms | CV | baseline ms | speedup | SOL fraction |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r['kind']} | {r['problem']} | {r['solution']} | {r['status']} | {_fmt(r['failed_check'])} | "
                f"{_fmt(r['sol_ms'])} | {_fmt(r['cv'], 2)} | {_fmt(r['baseline_ms'])} | {_fmt(r['speedup'], 3)} | "
                f"{_fmt(r['sol_fraction'], 3)} |"
            )
        lines.append("")
    rows = journal.part("fidelity")
    if rows:
        lines += [
            "## Timing fidelity (separate evaluator runs of the same solution)",
            "",
            "| problem | runs | median ms per run | samples per run | SM MHz per run (before-after) | "
            "spread (max-min)/min |",
            "|---|---|---|---|---|---|",
        ]
        spreads = []
        for problem in dict.fromkeys(r["problem"] for r in rows):
            times = [r["sol_ms"] for r in rows if r["problem"] == problem and r["sol_ms"]]
            spread = (max(times) - min(times)) / min(times) if len(times) > 1 else None
            if spread is not None:
                spreads.append(spread)
            timed = [r for r in rows if r["problem"] == problem and r["sol_ms"]]
            reps = ", ".join(str(r.get("reps")) for r in timed)
            clocks = ", ".join(_clock_text(r) for r in timed)
            lines.append(
                f"| {problem} | {len(times)} | {', '.join(_fmt(t) for t in times)} | {reps} | {clocks} | "
                f"{'-' if spread is None else f'{spread:.2%}'} |"
            )
        if spreads:
            lines += [
                "",
                f"Max spread across problems: **{max(spreads):.2%}** (median {statistics.median(spreads):.2%}).",
            ]
        lines.append("")
    text = "\n".join(lines)
    Path(args.out).write_text(text)
    return text


PARTS = ("baselines", "solutions", "fidelity")


def _parts(text: str) -> tuple[str, ...]:
    if text == "all":
        return PARTS
    if text == "report":
        return ()
    parts = tuple(p for p in text.split(",") if p)
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        raise argparse.ArgumentTypeError(f"unknown part(s) {unknown or text!r}: use all, report or {','.join(PARTS)}")
    return parts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="markdown file (journal: <out>.jsonl)")
    parser.add_argument(
        "--part", default="all", type=_parts, help="all, report, or a comma list of baselines,solutions,fidelity"
    )
    parser.add_argument("--split", default="h100")
    parser.add_argument("--gpu", default="h100", help="GPU for the speed-of-light figures")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument(
        "--problems", type=lambda s: [p for p in s.split(",") if p], help="only these problem ids (baselines, fidelity)"
    )
    parser.add_argument("--problems-dir", type=Path)
    parser.add_argument("--cap", type=float, default=240.0, help="seconds per child process (per problem)")
    parser.add_argument("--budget", type=float, default=480.0, help="start no new item after this many seconds")
    parser.add_argument("--timing-seconds", type=float, default=5.0, help="timing budget per timed function")
    parser.add_argument("--workers", type=int, default=4, help="baseline problems in flight at once")
    parser.add_argument("--runs", type=int, default=5, help="evaluator runs per fidelity problem")
    parser.add_argument("--cache", type=Path, help="baseline cache folder")
    parser.add_argument("--no-compile", action="store_true", help="eager baselines only (CPU rehearsal)")
    parser.add_argument("--no-baseline-in-solutions", action="store_true")
    args = parser.parse_args(argv)
    journal = Journal(Path(str(args.out) + ".jsonl"))
    deadline = time.monotonic() + args.budget
    if "baselines" in args.part:
        run_baselines(args, journal, deadline)
    if "solutions" in args.part:
        run_solutions(args, journal, deadline)
    if "fidelity" in args.part:
        run_fidelity(args, journal, deadline)
    print(write_report(args, journal))
    pending = time.monotonic() > deadline
    if pending:
        print("\n(budget reached: run the same command again to continue)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
