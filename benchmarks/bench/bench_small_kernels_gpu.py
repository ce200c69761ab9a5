"""Small kernels timed right: the evaluator under MPS (the default) and with --no-mps, against the
same solutions timed outside it, the null-call ladder, the attacks on the gate, the daemon's cost.

Parts (each appends JSON lines to OUT/small_kernels_gpu.jsonl; a line's `key` is never measured
twice, so a rerun after a lost machine resumes where the journal ends):

- `probe`: the GPU, the driver, whether the ladder's %globaltimer kernel compiles and runs.
- `outside` (run it in a process without MPS): every solution below, and each problem's reference
  (eager, and torch.compile(mode="reduce-overhead") as a user calls it), timed as
  `bench_calls_gpu.py` does: one CUDA graph over rotating input sets of at least 3x the L2;
  also CUDA events around one call behind a flush (the ladder's truth is this figure).
- `evaluator`: `evaluate()` of every honest solution RUNS times in this process (its MPS daemon
  started once at the top, as `kbv3` does; `--no-mps` for plain mode), the ladder's rungs, and
  the attacks on the gate (done early, a faster hold, the gate inside the kernel).
- `cli`: `kbv3 eval --json` as a user runs it (its own daemon), wall time per evaluation with the
  baseline cached; a `kbv3 eval` killed with SIGKILL mid-timing, then the next evaluation; a
  solution that faults (illegal address) and an honest one after it in one `eval-batch`.

`--report JOURNAL` prints the tables (`benchmarks/results/small_kernels_gpu.md`).

    PYTHONPATH=. python3 benchmarks/bench/bench_small_kernels_gpu.py --parts probe,outside --no-mps --out DIR
    PYTHONPATH=. python3 benchmarks/bench/bench_small_kernels_gpu.py --parts evaluator,cli --out DIR
    bash benchmarks/bench/small_kernels_session.sh start   # all of it as one background job
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_calls_gpu as calls  # noqa: E402  (the outside timing and the honest set are its)

HONEST = REPO / "benchmarks" / "solutions"
LADDER_PROBLEMS = REPO / "benchmarks" / "problems"
LADDER_PROBLEM = "level1/900_Null_ladder"
LADDER_TEMPLATE = HONEST / "ladder_spin.py.in"
LADDER_US = (2, 5, 10, 20, 50, 100, 500)
GPU_ATTACKS = REPO / "tests" / "solutions" / "gpu"
GATE_ATTACKS = (
    "gate_done_mid_graph_gemm_half",
    "gate_done_mid_graph_gemm_three_quarters",
    "gate_done_mid_graph_softmax_half",
    "gate_done_early_softmax",
    "gate_spin_where_echo_waits_softmax",  # not done early: held by a spin where the echo waits
    "gate_in_kernel_softmax",  # not done early: GO read and DONE written by its own kernel
)
EXTRA = [
    ("level1/23_Softmax", HONEST / "level1/23_Softmax_two_streams.py", "honest two-stream softmax"),
    ("level1/26_GELU_", HONEST / "level1/26_GELU_persistent.py", "honest persistent GELU"),
    ("level1/23_Softmax", HONEST / "level1/23_Softmax_own_graph.py", "honest softmax, own graph"),
    ("level1/23_Softmax", HONEST / "level1/23_Softmax_clone_input.py", "honest softmax on a clone of its input"),
    (
        "level1/47_Sum_reduction_over_a_dimension",
        HONEST / "level1/47_Sum_reduction_two_stage.py",
        "honest two-stage sum",
    ),
]
SOLUTIONS = calls.SOLUTIONS + [s for s in EXTRA if s[1].exists() and s not in calls.SOLUTIONS]
SMALL_US = 100.0  # "small": outside under this; these run RUNS times, the rest once
RECORD_KEYS = (
    "status",
    "failed_check",
    "error",
    "sol_ms",
    "sol_p10_ms",
    "sol_p90_ms",
    "sol_reps",
    "baseline_ms",
    "baseline_type",
    "eager_ms",
    "compiled_ms",
    "speedup",
    "timing_method",
    "timing_flags",
    "timing_note",
    "phase_s",
    "duration_s",
    "baseline_cached",
)
DETAIL_KEYS = (
    "calls",
    "echo_window_ms",
    "echo_call_ms",
    "echo_kernel_ms",
    "gap",
    "prep",
    "arm_ms",
    "verified_calls",
    "mps",
    "unresolved",
    "raw_calls_ms",  # (window, echo window) per call: the estimator can be re-derived offline
)


class Journal:
    def __init__(self, out: Path):
        out.mkdir(parents=True, exist_ok=True)
        self.path = out / "small_kernels_gpu.jsonl"
        self.done = set()
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    self.done.add(json.loads(line).get("key"))
                except ValueError:
                    pass

    def has(self, key: str) -> bool:
        return key in self.done

    def write(self, key: str, entry: dict) -> None:
        entry = {"key": key, "at": time.strftime("%H:%M:%S"), **entry}
        with open(self.path, "a") as f:
            f.write(json.dumps(entry, default=str) + "\n")
        self.done.add(key)
        print(json.dumps(entry, default=str)[:300], flush=True)


def ladder_solutions(folder: Path) -> list[tuple[str, Path, str]]:
    """One solution file per rung, from the template."""
    folder.mkdir(parents=True, exist_ok=True)
    template = LADDER_TEMPLATE.read_text()
    rungs = []
    for us in LADDER_US:
        path = folder / f"ladder_{us}us.py"
        path.write_text(template.replace("{spin_ns}", str(us * 1000)))
        rungs.append((LADDER_PROBLEM, path, f"ladder {us} us"))
    return rungs


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return path.name


def probe(journal: Journal, ladder: list) -> None:
    import torch

    entry = {"part": "probe", "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    entry["smi"] = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version,compute_mode,clocks.sm", "--format=csv,noheader"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    try:
        from kernelbench_v3.catalog.materialize import load_module

        module = load_module(LADDER_PROBLEMS / f"{LADDER_PROBLEM}.py", {})
        model, _ = calls._solution_model(ladder[2][1], module, "cuda")
        x = torch.randn(1024, device="cuda")
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        model(x)
        start.record()
        y = model(x)
        end.record()
        end.synchronize()
        entry["ladder_10us_events_ms"] = start.elapsed_time(end)
        entry["ladder_correct"] = bool(torch.allclose(y, x * 2))
    except Exception as exc:  # noqa: BLE001
        entry["ladder_error"] = f"{type(exc).__name__}: {exc}"[:800]
    journal.write("probe", entry)


def _gated_in_process_ms(model, module, behind_kernel: bool, calls_n: int = 201) -> float:
    """One call at a time behind an in-process gate, as the evaluator times a call but with no
    second process and no echo: wait(GO) -> [a tiny kernel] -> the forward's graph -> DONE, the
    window by the host's clock, less the same window around a graph of one tiny kernel. Beside
    the rotating figure it says whether one gated call and back-to-back calls differ for this
    forward (a two-stream forward's fork), whatever the evaluator's processes add.
    `behind_kernel`: the graph follows a kernel on its stream, as a call follows the last."""
    import torch

    from kernelbench_v3.evaluate.protocol.gate import Driver, GateWords, private_block

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.ones(2 * l2 // 4, dtype=torch.int32, device="cuda")
    with torch.device("cuda"):
        sets = [list(module.get_inputs()) for _ in range(4)]
    tiny = torch.zeros(1, device="cuda")
    calls.warm_up_beside(model, sets)
    graphs = []
    for s in sets:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            model(*s)
        graphs.append(g)
    null = torch.cuda.CUDAGraph()
    with torch.cuda.graph(null):
        tiny.add_(1)
    driver, stream = Driver(), torch.cuda.Stream()
    _page, view, address = private_block()
    gate = GateWords(view)
    gate.register(driver, address, fresh=True)
    gate.go = gate.done = 0
    seq = 0

    def window(graph) -> float:
        nonlocal seq
        seq += 1
        flush.add_(1)
        torch.cuda.synchronize()

        def work() -> None:
            if behind_kernel:
                tiny.add_(1)
            graph.replay()

        gate.enqueue(driver, stream, seq, work)
        time.sleep(0.0002)  # the GPU reaches the wait before GO is written, as in the evaluator
        started = time.perf_counter()
        gate.go = seq
        while gate.done < seq:
            pass
        return time.perf_counter() - started

    nets = []
    for i in range(calls_n):
        echo = window(null)
        nets.append(window(graphs[i % len(graphs)]) - echo)
    stream.synchronize()
    return statistics.median(nets[10:]) * 1e3


def _single_call_ms(model, module, calls_n: int = 41) -> float:
    """Events around one call on new inputs behind a flush of twice the L2: the ladder's truth."""
    import torch

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.ones(2 * l2 // 4, dtype=torch.int32, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(calls_n):
        with torch.device("cuda"):
            inputs = list(module.get_inputs())
        flush.sum()
        torch.cuda.synchronize()
        start.record()
        model(*inputs)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def outside(journal: Journal, solutions: list, part: str = "outside") -> None:
    """Each solution timed in this process, not by the evaluator: over rotating sets in one graph,
    one call, one gated call; the reference's eager and compiled figures too. `part` "outside-mps"
    is the same in a process under the MPS daemon (is a kernel boundary dearer there?)."""
    import torch

    from kernelbench_v3.catalog.materialize import load_module, make_model
    from kernelbench_v3.catalog.problem import get_problem

    for problem_id, path, label in solutions:
        key = f"{part}|{problem_id}|{_rel(path)}"
        if journal.has(key):
            continue
        root = LADDER_PROBLEMS if problem_id == LADDER_PROBLEM else None
        module = load_module(get_problem(problem_id, root).path, {})
        entry = {"part": part, "problem": problem_id, "solution": _rel(path), "label": label}
        try:
            with torch.no_grad():
                model, _ = calls._solution_model(path, module, "cuda")
                entry["rotating_ms"], entry["rotating_sets"] = calls._rotating_ms(model, module, True)
                entry["single_call_ms"] = _single_call_ms(model, module)
                entry["gated_in_process_ms"] = _gated_in_process_ms(model, module, behind_kernel=False)
                entry["gated_behind_kernel_ms"] = _gated_in_process_ms(model, module, behind_kernel=True)
                ref_key = f"outside-ref|{problem_id}"
                if part == "outside" and not journal.has(ref_key) and problem_id != LADDER_PROBLEM:
                    ref = make_model(module, "cuda", 0)
                    eager, _ = calls._rotating_ms(ref, module, True)
                    compiled = torch.compile(ref, mode="reduce-overhead")
                    with torch.device("cuda"):
                        one = list(module.get_inputs())
                    for _ in range(3):
                        compiled(*one)
                    compiled_ms = calls._events_behind_sleep_ms(compiled, module)
                    journal.write(
                        ref_key,
                        {
                            "part": "outside-ref",
                            "problem": problem_id,
                            "eager_rotating_ms": eager,
                            "compiled_events_ms": compiled_ms,
                        },
                    )
        except Exception as exc:  # noqa: BLE001 - one broken entry must not end the part
            entry["error"] = f"{type(exc).__name__}: {exc}"[:500]
        journal.write(key, entry)
        torch.cuda.empty_cache()


def _record_entry(rec) -> dict:
    d = rec.to_dict()
    entry = {k: d.get(k) for k in RECORD_KEYS}
    if d.get("status") != "correct":  # what the solution process said, to read a failure offline
        entry["log_tail"] = (d.get("log_tail") or "")[-1500:]
    details = d.get("timing_details") or {}
    entry["timing"] = {k: details.get(k) for k in DETAIL_KEYS}
    return entry


def _outside_us(journal_path: Path) -> dict:
    found = {}
    if journal_path.exists():
        for line in journal_path.read_text().splitlines():
            e = json.loads(line)
            if e.get("part") == "outside" and e.get("rotating_ms"):
                found[(e["problem"], e["solution"])] = e["rotating_ms"] * 1e3
    return found


def evaluator(
    journal: Journal, solutions: list, ladder: list, runs: int, mode: str, baseline: bool, attacks: bool = True
) -> None:
    from kernelbench_v3.evaluate import EvalRequest, evaluate, keep_zygotes_warm

    keep_zygotes_warm()
    sizes = _outside_us(journal.path)
    # cheapest first (no baseline); every rung RUNS times: the echo's level differs by evaluation
    work = [(p, path, label, run, "ladder") for run in range(runs) for p, path, label in ladder]
    if attacks:  # in every mode: without MPS the gap check's margin is what stands against DONE early
        for stem in GATE_ATTACKS:
            path = GPU_ATTACKS / f"{stem}.py"
            problem = re.search(r"^Problem: (\S+)", path.read_text(), re.M).group(1)
            work.append((problem, path, stem, 0, "attack"))
    for problem_id, path, label in solutions:
        small = sizes.get((problem_id, _rel(path)), 0.0) < SMALL_US
        work += [(problem_id, path, label, run, "honest") for run in range(runs if small else 1)]
    for problem_id, path, label, run, kind in work:
        key = f"evaluator|{mode}|{problem_id}|{_rel(path)}|{run}"
        if journal.has(key):
            continue
        started = time.perf_counter()
        root = LADDER_PROBLEMS if problem_id == LADDER_PROBLEM else None
        try:
            request = EvalRequest(
                problem_id, path, device="cuda", baseline=baseline and kind != "ladder", scan_source=kind != "attack"
            )
            entry = _record_entry(evaluate(request, problems_dir=root))
        except Exception as exc:  # noqa: BLE001
            entry = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        entry.update(
            estimator="window-echo",  # TIMING_VERSION 8: the net time adds nothing back
            part="evaluator",
            mode=mode,
            kind=kind,
            problem=problem_id,
            solution=_rel(path),
            label=label,
            run=run,
            wall_s=round(time.perf_counter() - started, 2),
        )
        journal.write(key, entry)


def _kbv3(*argv: str, timeout: float = 300) -> tuple[int, float, str, str]:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "kernelbench_v3.cli.main", *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
    )
    return proc.returncode, round(time.perf_counter() - started, 2), proc.stdout, proc.stderr


def _mps_left_after(wait_s: float = 15.0) -> tuple[list[str], float]:
    """What of kbv3's daemons is still there once the reaper has had `wait_s` to end it, and how
    long it took to go (the reaper quits the daemon after the CLI exits, not before)."""
    started = time.perf_counter()
    left = _mps_left()
    while left and time.perf_counter() - started < wait_s:
        time.sleep(0.25)
        left = _mps_left()
    return left, round(time.perf_counter() - started, 2)


def _mps_left() -> list[str]:
    """Daemon processes and kbv3-mps-* folders of this user still present."""
    left = [p.name for p in Path(tempfile.gettempdir()).glob("kbv3-mps-*")]
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return left + [line.strip() for line in ps.splitlines() if "nvidia-cuda-mps" in line]


def cli(journal: Journal, runs: int) -> None:
    examples = REPO / "examples" / "solutions"
    cases = [
        ("level1/23_Softmax", examples / "level1/23_Softmax.py"),
        ("level1/26_GELU_", examples / "level1/26_GELU_.py"),
        ("level1/1_Square_matrix_multiplication_", examples / "level1/1_Square_matrix_multiplication_.py"),
    ]
    gate = os.environ.get("KBV3_GATE", "")  # handed on to each kbv3 (`--gate`)
    tag = f"cli-{gate}" if gate else "cli"  # each gate's figures apart in one journal
    for problem_id, path in cases:
        for run in range(runs):
            key = f"{tag}|{problem_id}|{run}"
            if journal.has(key):
                continue
            rc, wall, out, err = _kbv3("eval", "--problem", problem_id, "--solution", str(path), "--json")
            try:
                rec = json.loads(out)
                entry = {
                    k: rec.get(k)
                    for k in (
                        "status",
                        "sol_ms",
                        "speedup",
                        "duration_s",
                        "baseline_cached",
                        "timing_flags",
                        "timing_note",
                        "phase_s",
                        "wall_phase_s",
                        "wall_background_s",
                    )
                }
                entry["record_wall_s"] = rec.get("wall_s")  # the CLI's own, from its start (evaluate/wall.py)
                details = rec.get("timing_details") or {}
                entry["mps"] = details.get("mps")
                entry["gate"], entry["echo"] = details.get("gate"), details.get("echo")
                entry["raw_calls_ms"] = details.get("raw_calls_ms")  # to read a stray figure offline
            except ValueError:
                entry = {"stderr": err[-800:]}
            journal.write(
                key,
                {
                    "part": "cli",
                    "problem": problem_id,
                    "run": run,
                    "rc": rc,
                    "wall_s": wall,
                    **dict(zip(("mps_left_after", "mps_gone_after_s"), _mps_left_after())),
                    **entry,
                },
            )
    if not journal.has(f"{tag}|kill9"):
        softmax = examples / "level1/23_Softmax.py"
        started = time.perf_counter()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kernelbench_v3.cli.main",
                "eval",
                "--problem",
                "level1/23_Softmax",
                "--solution",
                str(softmax),
                "--json",
                "--timing-seconds",
                "30",
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line, seen = "", []
        while proc.poll() is None and time.perf_counter() - started < 120:  # wait for timing to be under way
            line = proc.stderr.readline()
            seen.append(line.strip())
            if "timing" in line or "candidate" in line or time.perf_counter() - started > 25:
                break
        time.sleep(3)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        left_at_kill = _mps_left()
        time.sleep(15)  # the reaper's grace period
        left_later = _mps_left()
        rc, wall, out, err = _kbv3("eval", "--problem", "level1/23_Softmax", "--solution", str(softmax), "--json")
        try:
            after = {k: json.loads(out).get(k) for k in ("status", "sol_ms", "speedup")}
        except ValueError:
            after = {"stderr": err[-800:]}
        journal.write(
            f"{tag}|kill9",
            {
                "part": "cli-kill9",
                "gate": gate,
                "killed_after_s": round(time.perf_counter() - started, 1),
                "stderr_seen": seen[-5:],
                "left_at_kill": left_at_kill,
                "left_15s_later": left_later,
                "next_rc": rc,
                "next_wall_s": wall,
                "next": after,
                "left_after_next": _mps_left(),
            },
        )
    # A faulting solution in a batch: on the default two workers per GPU, and on one worker
    # with honest items on both sides of it, so a replacement worker starts against the same MPS
    # server after the fault (alphabetical order: 23 before the fault at 26, 40 after it).
    for suffix, workers in (("fault", None), ("fault-one-worker", 1)):
        if not journal.has(f"{tag}|{suffix}"):
            journal.write(f"{tag}|{suffix}", {"part": "cli-fault", "gate": gate, **_fault_batch(examples, workers)})


def _fault_batch(examples: Path, workers: int | None) -> dict:
    import pandas as pd

    folder = Path(tempfile.mkdtemp(prefix="kbv3-fault-"))
    (folder / "level1").mkdir()
    shutil.copy(GPU_ATTACKS / "illegal_address_gelu.py", folder / "level1" / "26_GELU_.py")
    shutil.copy(examples / "level1/23_Softmax.py", folder / "level1" / "23_Softmax.py")
    shutil.copy(examples / "level1/40_LayerNorm.py", folder / "level1" / "40_LayerNorm.py")
    result = folder / "out.parquet"
    extra = ["--workers", str(workers)] if workers else []
    rc, wall, out, err = _kbv3("eval-batch", str(folder), "--split", "h100", "--out", str(result), *extra, timeout=600)
    rows = pd.read_parquet(result).to_dict("records") if result.exists() else []
    return {  # the records first: the report shows the first 1,500 characters
        "workers": workers or "default",
        "rc": rc,
        "wall_s": wall,
        "records": [
            {
                **{k: r.get(k) for k in ("problem_id", "status", "failed_check", "sol_ms", "speedup")},
                "error": str(r.get("error") or "")[:160],
            }
            for r in rows
        ],
        "stderr": err[-800:],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="probe,outside")
    parser.add_argument("--out", type=Path, default=Path("/tmp/kbv3-small"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-mps", action="store_true", help="the evaluator part in plain mode")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--only-small", action="store_true", help="only solutions outside under SMALL_US")
    parser.add_argument("--no-attacks", action="store_true", help="leave out the attacks on the gate")
    parser.add_argument("--only-ladder", action="store_true", help="the evaluator part: only the ladder")
    parser.add_argument(
        "--gate",
        choices=("spin", "wait", "node", "flat", "pdl", "pdl-go", "hold"),
        help="the gate's kind (KBV3_GATE); else the default",
    )
    parser.add_argument("--echo", choices=("fused", "graph"), help="the echo's call (KBV3_ECHO); else the default")
    parser.add_argument(
        "--hold-threads", type=int, help="HOLD's block size (KBV3_HOLD_THREADS); else the fewest blocks"
    )
    parser.add_argument("--report", type=Path)
    parser.add_argument("--best-gate", type=Path, help="print the gate whose ladder in this journal came closest")
    args = parser.parse_args()
    if args.best_gate:
        from small_kernels_report import best_gate

        gate, figures = best_gate(args.best_gate)
        print(f"ladders, median |scored - rotating| us: {figures}; best: {gate}", file=sys.stderr)
        print(gate)
        return 0
    if args.report:
        from small_kernels_report import report

        print(report(args.report))
        return 0
    from kernelbench_v3.evaluate import mps

    journal = Journal(args.out)
    ladder = ladder_solutions(args.out / "ladder")
    solutions = [] if args.only_ladder else SOLUTIONS
    if args.gate:
        os.environ["KBV3_GATE"] = args.gate  # read by the evaluator's timing in this process
    if args.echo:
        os.environ["KBV3_ECHO"] = args.echo
    if args.hold_threads:
        os.environ["KBV3_HOLD_THREADS"] = str(args.hold_threads)
    if args.only_small:
        sizes = _outside_us(journal.path)
        solutions = [s for s in SOLUTIONS if sizes.get((s[0], _rel(s[1])), 1e9) < SMALL_US]
    parts = args.parts.split(",")
    # The daemon first, before any CUDA context of this process (as `kbv3` starts it).
    with mps.daemon(not args.no_mps and ("evaluator" in parts or "outside-mps" in parts)) as under_mps:
        print(f"MPS in use: {under_mps}", flush=True)
        for part in parts:
            if part == "probe":
                probe(journal, ladder)
            elif part == "outside":
                outside(journal, solutions + ladder)
            elif part == "outside-mps":
                if under_mps:
                    outside(journal, solutions + ladder, part="outside-mps")
                else:
                    print("outside-mps: no MPS daemon in this process, skipped", flush=True)
            elif part == "evaluator":
                mode = ("mps" if under_mps else "plain") + (f"-gate-{args.gate}" if args.gate else "")
                mode += f"-echo-{args.echo}" if args.echo else ""
                mode += f"-blocks-{args.hold_threads}" if args.hold_threads else ""
                evaluator(
                    journal,
                    solutions,
                    ladder,
                    args.runs,
                    mode,
                    baseline=not args.no_baseline,
                    attacks=not (args.no_attacks or args.only_ladder),
                )
            elif part == "cli":
                cli(journal, args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
