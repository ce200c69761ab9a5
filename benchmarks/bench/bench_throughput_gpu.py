"""Evaluation throughput on the H200 (issues 17, 42): `kbv3 eval` wall time cold and warm, `kbv3
eval-batch` throughput on one GPU and on several, batch-vs-eval timing agreement, and where the
time goes (`phase_s`, and every second of a `kbv3 eval` process: `wall_phase_s`).

Run from the repository root (no install needed, no `datasets`: only the `kbv3 eval` and
`kbv3 eval-batch` code paths run, each as a fresh `python -m kernelbench_v3.cli` process):

    PYTHONPATH=. python3 benchmarks/bench/bench_throughput_gpu.py --gpus 0,1 --out /tmp/kbv3-throughput
    python3 benchmarks/bench/bench_throughput_gpu.py --device cpu --quick --out /tmp/tp   # CPU rehearsal

What runs, in order, all at default shapes on the `h100` split (CPU: each problem's reduced
sizes) with the evaluator's own defaults unless `--timing-seconds`, `--seeds` or
`--no-other-shape` say otherwise; every solution is judged with `--relax-kernel-check`:

1. `eval-cold`: `--evals` evaluations (default 20), one per problem: the bundled honest
   solutions (examples/solutions/) and, for the rest, problem files as their own solutions,
   spread over the split. Each is a fresh `python -m kernelbench_v3.cli eval ... --json`
   process on the first GPU of `--gpus`, timed from its start to the record. The caches start
   empty: KBV3_CACHE_DIR (baselines, references), TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR and
   KBV3_MODULE_DIR all point to fresh folders under `<out>/work/`.
2. `eval-warm`: the same evaluations again, with the caches the cold pass left, `--warm-passes`
   times (default 3: the issue's 6 problems x 3).
2b. `serve`: `kbv3 serve` on the first GPU, then `--serve-requests` (default 20) fresh
   `kbv3 eval --server` processes over the same problems in turn (target <= 3 s each), until
   65% of the budget; the service is stopped after.
2c. `compile` (only when `--parts` names it): a cold baseline's compile with inductor's
   default compile threads against one (`TORCHINDUCTOR_COMPILE_THREADS=1`): `kbv3 baselines
   --only P` for `--compile-probes` problems outside the evaluated ones, each once per setting
   (the order alternating), every run with caches of its own, timed as a whole.
2d. `baselines` (only when `--parts` names it): `kbv3 baselines --split SPLIT` on the first GPU,
   timed as a whole; what it timed and what it found cached (a seeded cache's run fills only
   what the seed lacks).
3. `batch fill`: `kbv3 eval-batch` over one solution per problem of the split (54 on h100: the
   honest solution where there is one, else the problem file), on all of `--gpus`, to fill the
   baseline and reference caches.
4. `batch timed`: the same batch again with a new `--out` (and journal), once per GPU set of
   `--gpu-sets` (default: the full `--gpus` list, then its first GPU alone) and per worker count
   of `--timed-workers` (e.g. `2,1`: eval-batch's default two workers per GPU, then one): wall
   time of the `eval-batch` command per solution, and the speedup of several GPUs over one.

`--parts` picks them: compile, eval, serve, baselines, fill, timed (`batch` is fill,timed; default
`eval,serve,batch`). A session too short for all of it runs `eval,serve,fill` first and brings
the cache back; the next runs `baselines,timed` on it (`--seed-cache`).

Reported (`<out>/throughput.md`, also printed): median / p90 / max wall time per `kbv3 eval`
cold and warm (targets: <= 20 s cold, <= 8 s warm), seconds per solution of each timed batch
(target <= 4 s on one GPU) and the speedup (target >= 1.9x on two GPUs), the honest solutions'
`sol_ms` in each timed batch against their warm `kbv3 eval` (target: within 1%), each
`phase_s` phase's median and p90 per pass, and (section 5) the median and p90 of every named part
of a `kbv3 eval` process's wall, from its start to its exit (`wall_phase_s`, then `process_exit`:
this script's wall less the record's `wall_s`), with what ran beside them.

Incremental and resumable: each evaluation and each batch pass appends one row to
`<out>/throughput.jsonl` the moment it ends; a rerun with the same `--out` skips what is there
(a batch pass stopped at the budget is redone: the fill pass resumes from its journal, a timed
pass starts again). `--budget` (seconds, default 1200) is split so every part gets a share: the
cold evaluations may start until 40% of it, the warm ones until 55%, the fill pass until what
the timed passes need is left; then no new evaluation starts, a running batch is stopped
(SIGTERM: it writes what it finished), and the table is written from whatever is in the
journal. `--report-only` renders the table from the journal alone. On the device tool, run it
through `throughput_session.sh` (a background job that outlives the 10-minute calls).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput_report import TARGET_BATCH_S, Journal, report  # noqa: E402

from kernelbench_v3.catalog.problem import discover  # noqa: E402

EXAMPLES = REPO / "examples" / "solutions"
# Cheapest first: a quick run with few evaluations takes the first ones.
HONEST = [
    "level1/23_Softmax",
    "level1/26_GELU_",
    "level1/40_LayerNorm",
    "level2/86_Matmul_Divide_GELU",
    "tile_specialized/gemm_bias_relu",
    "level1/1_Square_matrix_multiplication_",
]

BATCH_MODEL = "throughput"


class Stop(Exception):
    """SIGTERM or SIGINT reached the script: write the table from what is journaled."""


# ----------------------------------------------------------------------------- work items


def solution_for(problem) -> tuple[str, Path]:
    honest = EXAMPLES / f"{problem.problem_id}.py"
    return ("honest", honest) if honest.exists() else ("reference", problem.path)


def pick_evals(problems: list, n: int) -> list:
    """`n` problems: honest ones first, the rest spread evenly over the split's other problems."""
    by_id = {p.problem_id: p for p in problems}
    honest = [by_id[i] for i in HONEST if i in by_id]
    n_honest = min(len(honest), max(1, n - max(1, n // 3)))
    others = [p for p in problems if p not in honest[:n_honest] and p.problem_id not in HONEST]
    k = min(n - n_honest, len(others))
    spread = [others[round(i * len(others) / k)] for i in range(k)] if k else []
    return honest[:n_honest] + spread


def build_batch(folder: Path, problems: list, chosen: list, limit: int | None) -> list:
    """One solution per problem in a problems/-style folder, the evaluated problems first."""
    order = chosen + [p for p in problems if p not in chosen]
    order = order[:limit] if limit else order
    shutil.rmtree(folder, ignore_errors=True)
    for p in order:
        target = folder / p.category / p.file_name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(solution_for(p)[1], target)
    return order


# ----------------------------------------------------------------------------- running


def environment(work: Path) -> dict:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
        KBV3_CACHE_DIR=str(work / "kbv3-cache"),
        TRITON_CACHE_DIR=str(work / "triton-cache"),
        TORCHINDUCTOR_CACHE_DIR=str(work / "inductor-cache"),
        KBV3_MODULE_DIR=str(work / "modules"),
        PYTHONUNBUFFERED="1",
    )
    return env


def eval_options(args) -> list[str]:
    opts = ["--relax-kernel-check"]
    if args.timing_seconds is not None:
        opts += ["--timing-seconds", str(args.timing_seconds)]
    if args.seeds:
        opts += ["--seeds", args.seeds]
    if args.no_other_shape:
        opts.append("--no-other-shape")
    return opts


def run_group(command: list[str], env: dict, timeout: float, log: Path | None = None) -> tuple[int | None, str, bool]:
    """Run `command` in its own process group; on timeout SIGTERM it (then SIGKILL). Returns
    (returncode, stdout, stopped). stderr (and stdout when `log` is given) go to `log`."""
    out = open(log, "a") if log else subprocess.PIPE  # noqa: SIM115
    err = out if log else subprocess.DEVNULL
    process = subprocess.Popen(command, env=env, stdout=out, stderr=err, text=True, start_new_session=True)
    stopped = False
    try:
        stdout, _ = process.communicate(timeout=max(1.0, timeout))
    except (subprocess.TimeoutExpired, Stop) as exc:
        stopped = True
        _kill(process, signal.SIGTERM)
        try:
            stdout, _ = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            _kill(process, signal.SIGKILL)
            stdout, _ = process.communicate()
        if isinstance(exc, Stop):
            raise
    finally:
        if log:
            out.close()
    return process.returncode, stdout or "", stopped


def _kill(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


def one_eval(
    problem, mode: str, args, env: dict, deadline: float, journal: Journal, server: Path | None = None
) -> None:
    kind, solution = solution_for(problem)
    command = [sys.executable, "-m", "kernelbench_v3.cli", "eval", "--problem", problem.problem_id]
    command += ["--solution", str(solution), "--device", args.device, "--json", *eval_options(args)]
    if server is not None:
        command += ["--server", str(server)]
    started = time.monotonic()
    rc, stdout, stopped = run_group(command, env, min(args.eval_timeout, deadline - time.monotonic()))
    wall = time.monotonic() - started
    record = {}
    for line in reversed(stdout.splitlines()):
        try:
            record = json.loads(line)
            break
        except ValueError:
            continue
    row = {
        "kind": "eval",
        "mode": mode,
        "problem": problem.problem_id if server is None else f"{problem.problem_id}#{serve_index(journal)}",
        "solution": kind,
        "wall_s": round(wall, 3),
        "rc": rc,
        "stopped": stopped,
        **{k: record.get(k) for k in ("status", "error", "sol_ms", "baseline_ms", "duration_s", "phase_s")},
        **{k: record.get(k) for k in ("baseline_cached", "reference_cached", "timing_flags")},
        # The process's own account of its wall (issue 42): from its start to the record.
        "record_wall_s": record.get("wall_s"),
        "wall_phase_s": record.get("wall_phase_s"),
        "wall_background_s": record.get("wall_background_s"),
    }
    journal.add(row)
    print(
        f"[{mode}] {problem.problem_id} ({kind}): {wall:.1f}s {row['status']} sol_ms={row['sol_ms']}"
        + (" (stopped)" if stopped else ""),
        flush=True,
    )


def serve_index(journal: Journal) -> int:
    """The next request's number in the serve pass (one row per request, problems repeat)."""
    return len(journal.evals("serve"))


def serve_pass(chosen: list, args, env: dict, work: Path, deadline: float, journal: Journal) -> None:
    """`kbv3 serve` on the first GPU, then `--serve-requests` fresh `kbv3 eval --server`
    processes over the chosen problems in turn, each a row of mode `serve`; the service is
    stopped (SIGTERM) at the end, the budget or a signal."""
    from kernelbench_v3.serve.client import Evaluator

    done = len(journal.evals("serve"))
    if done >= args.serve_requests or not chosen:
        return
    sock = work / "serve" / "serve.sock"
    sock.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "kernelbench_v3.cli", "serve", "--socket", str(sock), "--device", args.device]
    log = open(work / "serve" / "log.txt", "a")  # noqa: SIM115
    started = time.monotonic()
    server = subprocess.Popen(command, env=env, stdout=log, stderr=log, start_new_session=True)
    try:
        while True:  # ready: the socket answers and every worker has said ready
            try:
                if all(w.get("ready") for w in Evaluator(sock).status().get("workers") or [{}]):
                    break
            except Exception:  # noqa: BLE001 - not listening yet
                pass
            if server.poll() is not None or time.monotonic() > min(deadline, started + 300):
                print(f"[serve] the service did not become ready (rc {server.poll()}); see {log.name}", flush=True)
                return
            time.sleep(0.2)
        print(f"[serve] ready in {time.monotonic() - started:.1f}s; {args.serve_requests - done} requests", flush=True)
        for i in range(done, args.serve_requests):
            if time.monotonic() > deadline:
                print(f"[serve] budget share used: {args.serve_requests - i} requests left unsent", flush=True)
                break
            one_eval(chosen[i % len(chosen)], "serve", args, env, deadline, journal, server=sock)
    finally:
        _kill(server, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            _kill(server, signal.SIGKILL)
            server.wait()
        log.close()


def batch_pass(
    name: str, gpus: str, workers: int | None, solutions: Path, n: int, args, env, deadline, journal
) -> None:
    tag = f"{name}_gpus_{gpus.replace(',', '_')}" + (f"_workers_{workers}" if workers else "")
    run_dir = args.out / "work" / "batch" / tag
    if name == "timed":
        shutil.rmtree(run_dir, ignore_errors=True)  # a timed pass is only meaningful from the start
    run_dir.mkdir(parents=True, exist_ok=True)
    out = run_dir / "results.parquet"
    command = [sys.executable, "-m", "kernelbench_v3.cli", "eval-batch", str(solutions), "--split", args.split]
    command += ["--out", str(out), "--device", args.device, "--model", BATCH_MODEL, "--no-progress"]
    command += eval_options(args)
    if args.device == "cuda":
        command += ["--gpus", gpus] + (["--workers", str(workers)] if workers else [])
    else:
        command += ["--workers", str(len(gpus.split(","))), "--shapes", "reduced"]
    print(f"[batch {tag}] {n} solutions, until {max(0.0, deadline - time.monotonic()):.0f}s from now", flush=True)
    started = time.monotonic()
    rc, _, stopped = run_group(command, env, deadline - time.monotonic(), log=run_dir / "log.txt")
    wall = time.monotonic() - started
    records = journal_records(run_dir / "results.parquet.journal.jsonl")
    statuses = Counter(r.get("status") for r in records)
    journal.add(
        {
            "kind": "batch",
            "pass": name,
            "gpus": gpus,
            "n_gpus": len(gpus.split(",")),
            "workers": workers,
            "solutions": n,
            "wall_s": round(wall, 3),
            "rc": rc,
            "stopped": stopped,
            "complete": len(records) == n and not stopped,
            "statuses": dict(statuses),
            "records": [
                {
                    k: r.get(k)
                    for k in (
                        "problem_id",
                        "status",
                        "sol_ms",
                        "duration_s",
                        "phase_s",
                        "baseline_cached",
                        "started_at",
                    )
                }
                for r in records
            ],
        }
    )
    print(f"[batch {tag}] {len(records)}/{n} records in {wall:.1f}s: {dict(statuses)}", flush=True)


def baselines_pass(args, env: dict, work: Path, deadline: float, journal: Journal, only: list | None) -> None:
    """`kbv3 baselines --split SPLIT` (`--only` the batch's problems under `--batch-limit`) on the
    first GPU, timed as a whole: one journal row with what it timed, found cached and failed,
    problem by problem."""
    if any(r["kind"] == "baselines" and not r["stopped"] for r in journal.rows):
        return
    command = [sys.executable, "-m", "kernelbench_v3.cli", "baselines", "--split", args.split, "--device", args.device]
    if args.timing_seconds is not None:
        command += ["--timing-seconds", str(args.timing_seconds)]
    if only:
        command += ["--only", ",".join(p.problem_id for p in only)]
    (work / "baselines").mkdir(parents=True, exist_ok=True)
    print(f"[baselines] until {max(0.0, deadline - time.monotonic()):.0f}s from now", flush=True)
    started = time.monotonic()
    log = work / "baselines" / "log.txt"
    rc, _, stopped = run_group(command, env, deadline - time.monotonic(), log=log)
    wall = time.monotonic() - started
    problems = baselines_lines(log.read_text())
    counts = Counter(problems.values())
    journal.add(
        {"kind": "baselines", "wall_s": round(wall, 3), "rc": rc, "stopped": stopped}
        | {"timed": counts["timed"], "cached": counts["cached"], "failed": counts["failed"], "problems": problems}
        | {"seconds": baselines_seconds(log.read_text())}
    )
    print(f"[baselines] {dict(counts)} in {wall:.1f}s", flush=True)


COMPILE_SETTINGS = {"default": {}, "one_thread": {"TORCHINDUCTOR_COMPILE_THREADS": "1"}}


def compile_probe(problems: list, args, env: dict, work: Path, deadline: float, journal: Journal) -> None:
    """A cold baseline under each of `COMPILE_SETTINGS`: `kbv3 baselines --only P`, every run
    with kbv3, inductor and Triton caches of its own (so each compiles from nothing), the order
    of the settings alternating from one problem to the next. One journal row per run."""
    done = {(r["problem"], r["setting"]) for r in journal.rows if r["kind"] == "compile"}
    for i, problem in enumerate(problems):
        order = list(COMPILE_SETTINGS) if i % 2 == 0 else list(reversed(COMPILE_SETTINGS))
        for setting in order:
            if (problem.problem_id, setting) in done:
                continue
            if time.monotonic() > deadline:
                print("[compile] budget share used", flush=True)
                return
            folder = work / "compile-probe" / f"{i}-{setting}"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            run_env = dict(env, **COMPILE_SETTINGS[setting])
            run_env |= {name: str(folder / name.lower()) for name in ("KBV3_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")}
            run_env |= {"TRITON_CACHE_DIR": str(folder / "triton")}
            command = [sys.executable, "-m", "kernelbench_v3.cli", "baselines", "--split", args.split]
            command += ["--device", args.device, "--only", problem.problem_id]
            started = time.monotonic()
            rc, _, stopped = run_group(command, run_env, deadline - time.monotonic() + 60, log=folder / "log.txt")
            wall = time.monotonic() - started
            line = next(
                (x for x in (folder / "log.txt").read_text().splitlines() if x.startswith(problem.problem_id)), ""
            )
            journal.add(
                {"kind": "compile", "problem": problem.problem_id, "setting": setting, "wall_s": round(wall, 3)}
                | {"rc": rc, "stopped": stopped, "result": line[len(problem.problem_id) + 2 :][:200]}
            )
            print(f"[compile] {problem.problem_id} {setting}: {wall:.1f}s rc={rc} {line[-80:]}", flush=True)


def baselines_lines(stdout: str) -> dict[str, str]:
    """`kbv3 baselines`' report, problem by problem: timed, cached or failed."""
    found = {}
    for line in stdout.splitlines():
        problem, sep, rest = line.partition(": ")
        if not sep or "/" not in problem:
            continue
        if rest.startswith("failed"):
            found[problem] = "failed"
        elif rest.endswith("]") and rest.rsplit("[", 1)[1].split()[0].rstrip("]") in ("timed", "cached"):
            found[problem] = rest.rsplit("[", 1)[1].split()[0].rstrip("]")
    return found


def baselines_seconds(stdout: str) -> dict[str, float]:
    """The seconds `kbv3 baselines` took for each baseline it timed (`[timed in 3.12 s]`), in order."""
    found = {}
    for line in stdout.splitlines():
        problem, sep, rest = line.partition(": ")
        said = re.search(r"\[timed in ([0-9.]+) s\]$", rest) if sep else None
        if said and not rest.startswith("failed"):
            found[problem] = float(said.group(1))
    return found


def journal_records(path: Path) -> list[dict]:
    """The latest record per problem in an eval-batch journal (its own format; no pandas)."""
    from kernelbench_v3.batch.journal import latest_records, read_journal

    if not path.exists():
        return []
    return list(latest_records(read_journal(path)[1]).values())


def probe(args) -> dict:
    code = (
        "import json, torch, triton; n = torch.cuda.device_count(); print(json.dumps({'torch': torch.__version__, "
        "'triton': triton.__version__, 'gpus': n, 'name': torch.cuda.get_device_name(0) if n else 'CPU'}))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    try:
        info = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        info = {"error": (result.stderr or "probe failed").strip()[-300:]}
    info["commit"] = commit_label(REPO)
    info["cpus"] = os.cpu_count()
    return info


# ----------------------------------------------------------------------------- main


def commit_label(repo: Path) -> str:
    """HEAD's short hash, with "+changes" when tracked files differ from it: the device tool's
    copy of a checkout carries the working tree over a .git that can be older than it."""
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    changed = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    )
    label = head.stdout.strip() or "unknown"
    return label + ("+changes" if changed.returncode == 0 and changed.stdout.strip() else "")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--out", type=Path, required=True, help="results folder (journal, table, work/)")
    parser.add_argument("--gpus", default="auto", help="GPU list, e.g. 0,1 (auto: all visible; cpu: 0,1 = 2 workers)")
    parser.add_argument(
        "--gpu-sets",
        help="space-separated GPU lists for the timed batch passes (default: the --gpus list, then its first GPU)",
    )
    parser.add_argument("--evals", type=int, help="`kbv3 eval` evaluations per pass (default 20; --quick 3)")
    parser.add_argument("--only", help="comma-separated problem ids: the split cut to these (eval picks and batch)")
    parser.add_argument("--batch-limit", type=int, help="only the first N batch solutions (default: all; --quick 3)")
    parser.add_argument(
        "--batch-workers", type=int, help="eval-batch's --workers on CUDA: workers per GPU (default: eval-batch's, 2)"
    )
    parser.add_argument("--split", default="h100")
    parser.add_argument("--budget", type=float, help="wall seconds for everything (default 1200; --quick 600)")
    parser.add_argument("--eval-timeout", type=float, default=300.0, help="seconds per `kbv3 eval` process")
    parser.add_argument("--timing-seconds", type=float, help="passed to eval/eval-batch (default: theirs)")
    parser.add_argument("--seeds", help="passed to eval/eval-batch (default: theirs)")
    parser.add_argument("--no-other-shape", action="store_true", help="passed to eval/eval-batch")
    parser.add_argument(
        "--parts",
        default="eval,serve,batch",
        help="eval, serve, baselines, fill, timed; batch is fill,timed (comma list; default eval,serve,batch)",
    )
    parser.add_argument("--compile-probes", type=int, default=3, help="problems of the compile part (default 3)")
    parser.add_argument(
        "--warm-passes", type=int, help="warm `kbv3 eval` passes over the same problems (default 3; --quick 1)"
    )
    parser.add_argument(
        "--timed-workers",
        type=lambda text: [int(x) for x in text.split(",")],
        help="a timed batch pass per worker count, e.g. 2,1 (default: --batch-workers or eval-batch's)",
    )
    parser.add_argument(
        "--serve-requests", type=int, help="`kbv3 eval --server` requests to one `kbv3 serve` (default 20; --quick 2)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="reduced sizes for a CPU rehearsal: 3 evaluations, 3 batch solutions, timing 0.5 s, seed 42, "
        "no second shape (unless given)",
    )
    parser.add_argument(
        "--seed-cache",
        type=Path,
        help="a kbv3 cache folder (baselines/, references/) to start from instead of an empty one, e.g. the "
        "kbv3_cache.tar.gz an earlier run on the same kind of GPU brought back, unpacked",
    )
    parser.add_argument("--report-only", action="store_true", help="run nothing: render the table from the journal")
    args = parser.parse_args(argv)
    if args.quick:
        args.evals = 3 if args.evals is None else args.evals
        args.serve_requests = 2 if args.serve_requests is None else args.serve_requests
        args.warm_passes = 1 if args.warm_passes is None else args.warm_passes
        args.batch_limit = 3 if args.batch_limit is None else args.batch_limit
        args.timing_seconds = 0.5 if args.timing_seconds is None else args.timing_seconds
        args.seeds = args.seeds or "42"
        args.no_other_shape = True
        args.budget = 600.0 if args.budget is None else args.budget
    args.evals = 20 if args.evals is None else args.evals
    args.warm_passes = 3 if args.warm_passes is None else args.warm_passes
    args.serve_requests = 20 if args.serve_requests is None else args.serve_requests
    args.budget = 1200.0 if args.budget is None else args.budget
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    deadline = started + args.budget
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out / "work"
    journal = Journal(args.out / "throughput.jsonl")
    command = "python3 benchmarks/bench/bench_throughput_gpu.py " + " ".join(sys.argv[1:] if argv is None else argv)
    info = probe(args)  # also brings torch into the file cache before the first timed process
    info["device"] = args.device
    runs = [row for row in journal.rows if row["kind"] == "run"]
    if args.report_only and runs:  # the table says where its figures were measured, not rendered
        info, command = runs[-1]["info"], runs[-1]["command"]
    if args.gpus == "auto":
        args.gpus = ",".join(str(i) for i in range(max(1, info.get("gpus") or 0))) if args.device == "cuda" else "0"
    sets = (
        args.gpu_sets.split()
        if args.gpu_sets
        else [args.gpus] + ([args.gpus.split(",")[0]] if "," in args.gpus else [])
    )
    print(f"{info}; GPUs {args.gpus}; timed sets {sets}; budget {args.budget:.0f}s", flush=True)

    def on_signal(signum, frame):
        raise Stop(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        if not args.report_only:
            work.mkdir(exist_ok=True)
            settings = " ".join(eval_options(args)) + (" (evaluator defaults otherwise)")
            settings += f"; sizes {'reduced' if args.device == 'cpu' else 'default'}; timed GPU sets {sets}"
            settings += f"; batch workers per GPU {args.batch_workers or 'eval-batch default (2)'}"
            if args.timed_workers:
                settings += f" (timed passes: {', '.join(map(str, args.timed_workers))})"
            settings += f"; {args.warm_passes} warm eval pass(es); parts {args.parts}"
            if args.seed_cache is not None:
                settings += f"; kbv3 cache seeded from {args.seed_cache} (baselines there are not cold)"
            journal.add({"kind": "run", "split": args.split, "settings": settings, "info": info, "command": command})
            run(args, journal, work, sets, started, deadline)
    except Stop:
        print("stopped by a signal: writing what is journaled", flush=True)
    finally:
        text = report(journal, info, command)
        (args.out / "throughput.md").write_text(text)
        print(text, flush=True)
        print(f"wrote {args.out / 'throughput.md'} ({time.monotonic() - started:.0f}s)", flush=True)
    return 0


def seed_cache(work: Path, seed: Path | None) -> None:
    """Start the kbv3 cache from `seed` (once: a resumed run keeps what it has)."""
    target = work / "kbv3-cache"
    if seed is None or target.exists():
        return
    if not seed.is_dir():
        raise SystemExit(f"--seed-cache {seed}: not a folder")
    shutil.copytree(seed, target)
    print(f"kbv3 cache seeded from {seed}", flush=True)


def run(args, journal: Journal, work: Path, sets: list[str], started: float, deadline: float) -> None:
    seed_cache(work, args.seed_cache)
    problems = discover(REPO / "problems", split=args.split)
    if args.only:  # a subset of the split: the eval picks and the batch both come from it
        wanted = set(args.only.split(","))
        unknown = wanted - {p.problem_id for p in problems}
        if unknown:
            raise SystemExit(f"--only: not in split {args.split}: {', '.join(sorted(unknown))}")
        problems = [p for p in problems if p.problem_id in wanted]
    if args.device == "cpu":
        problems = [p for p in problems if not p.cpu_unsupported]
    chosen = pick_evals(problems, args.evals)
    env = environment(work)
    parts = expand_parts(args.parts)
    gpu_env = dict(env, CUDA_VISIBLE_DEVICES=args.gpus.split(",")[0]) if args.device == "cuda" else env
    if "compile" in parts:
        others = [p for p in problems if p not in chosen]
        picked = [others[round(i * len(others) / args.compile_probes)] for i in range(args.compile_probes)]
        compile_probe(picked, args, gpu_env, work, min(deadline, started + 0.3 * args.budget), journal)
    if "eval" in parts:
        for mode, share in eval_passes(args.warm_passes):
            done = journal.evals(mode)
            todo = [p for p in chosen if p.problem_id not in done or done[p.problem_id].get("stopped")]
            if mode != "cold":  # the same evaluations the cold pass finished
                todo = [p for p in todo if p.problem_id in journal.evals("cold")]
            for i, p in enumerate(todo):
                if time.monotonic() > started + share * args.budget:
                    print(f"[{mode}] budget share used: {len(todo) - i} left unstarted", flush=True)
                    break
                one_eval(p, mode, args, gpu_env, deadline, journal)
    if "serve" in parts:
        serve_pass(chosen, args, gpu_env, work, min(deadline, started + 0.65 * args.budget), journal)
    batch = build_batch(work / "solutions", problems, chosen, args.batch_limit)
    if "baselines" in parts:
        baselines_pass(args, gpu_env, work, deadline, journal, batch if args.batch_limit else None)
    if not parts & {"fill", "timed"}:
        return
    n = len(batch)
    fill = journal.batch("fill", args.gpus, args.batch_workers)
    timed_workers = args.timed_workers or [args.batch_workers]
    if "fill" in parts and (fill is None or not fill["complete"]):
        # Leave the timed passes what they should need at the target pace (x1.25), at most 40%.
        need = sum(1.25 * TARGET_BATCH_S * n / len(s.split(",")) for s in sets) * len(timed_workers)
        need = min(need, 0.4 * args.budget) if "timed" in parts else 0.0
        if deadline - need - time.monotonic() > 10:
            batch_pass(
                "fill", args.gpus, args.batch_workers, work / "solutions", n, args, env, deadline - need, journal
            )
        else:
            print("[batch fill] no time left for it: timed passes start without it", flush=True)
        fill = journal.batch("fill", args.gpus, args.batch_workers)
    if "timed" not in parts:
        return
    filled = {r["problem_id"] for r in fill["records"]} if fill else set()
    solutions = work / "solutions"
    if fill and not fill["complete"] and filled:  # time only what the fill pass got through
        batch = [p for p in batch if p.problem_id in filled]
        build_batch(work / "solutions-filled", batch, batch, None)
        solutions, n = work / "solutions-filled", len(batch)
    for gpus in sets:
        for workers in timed_workers:
            done = journal.batch("timed", gpus, workers)
            if done and done["complete"] and done["solutions"] == n:
                continue
            if time.monotonic() > deadline - 5:
                print(f"[batch timed {gpus} workers {workers}] no time left", flush=True)
                continue
            batch_pass("timed", gpus, workers, solutions, n, args, env, deadline, journal)


def expand_parts(text: str) -> set[str]:
    known = {"compile", "eval", "serve", "baselines", "fill", "timed"}
    parts = set()
    for part in text.split(","):
        part = part.strip()
        if part == "batch":
            parts |= {"fill", "timed"}
        elif part in known:
            parts.add(part)
        else:
            raise SystemExit(f"--parts: unknown part {part!r} (known: batch, {', '.join(sorted(known))})")
    return parts


def eval_passes(warm_passes: int) -> list[tuple[str, float]]:
    """The `kbv3 eval` passes in order, each with the share of the budget until which its
    evaluations may start: cold, then `warm`, `warm-2`, ... (journal modes)."""
    warm = (["warm"] if warm_passes > 0 else []) + [f"warm-{i}" for i in range(2, warm_passes + 1)]
    return [("cold", 0.4)] + [(mode, 0.55) for mode in warm]


if __name__ == "__main__":
    sys.exit(main())
