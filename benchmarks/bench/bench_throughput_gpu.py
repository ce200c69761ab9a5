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
2. `eval-warm`: the same evaluations again, with the caches the cold pass left.
2b. `serve`: `kbv3 serve` on the first GPU, then `--serve-requests` (default 20) fresh
   `kbv3 eval --server` processes over the same problems in turn (target <= 3 s each), until
   65% of the budget; the service is stopped after.
3. `batch fill`: `kbv3 eval-batch` over one solution per problem of the split (54 on h100: the
   honest solution where there is one, else the problem file), on all of `--gpus`, to fill the
   baseline and reference caches.
4. `batch timed`: the same batch again with a new `--out` (and journal), once per GPU set of
   `--gpu-sets` (default: the full `--gpus` list, then its first GPU alone): wall time of the
   `eval-batch` command per solution, and the speedup of several GPUs over one.

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
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

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
TARGET_COLD_S, TARGET_WARM_S, TARGET_BATCH_S, TARGET_SPEEDUP, TARGET_AGREE = 20.0, 8.0, 4.0, 1.9, 0.01
TARGET_SERVE_S = 3.0  # per `kbv3 eval --server` request to a warm `kbv3 serve` (issue 42)
BATCH_MODEL = "throughput"


class Stop(Exception):
    """SIGTERM or SIGINT reached the script: write the table from what is journaled."""


# ----------------------------------------------------------------------------- journal


class Journal:
    """`throughput.jsonl`: one row per evaluation or batch pass, appended as it ends."""

    def __init__(self, path: Path):
        self.path = path
        self.rows = (
            [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
        )

    def add(self, row: dict) -> None:
        row = {"at": datetime.now(timezone.utc).isoformat(timespec="seconds"), **row}
        self.rows.append(row)
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")

    def evals(self, mode: str) -> dict[str, dict]:
        return {r["problem"]: r for r in self.rows if r["kind"] == "eval" and r["mode"] == mode}

    def batch(self, name: str, gpus: str) -> dict | None:
        found = [r for r in self.rows if r["kind"] == "batch" and r["pass"] == name and r["gpus"] == gpus]
        return found[-1] if found else None


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


def batch_pass(name: str, gpus: str, solutions: Path, n: int, args, env, work: Path, deadline, journal) -> None:
    tag = f"{name}_gpus_{gpus.replace(',', '_')}"
    run_dir = work / "batch" / tag
    if name == "timed":
        shutil.rmtree(run_dir, ignore_errors=True)  # a timed pass is only meaningful from the start
    run_dir.mkdir(parents=True, exist_ok=True)
    out = run_dir / "results.parquet"
    command = [sys.executable, "-m", "kernelbench_v3.cli", "eval-batch", str(solutions), "--split", args.split]
    command += ["--out", str(out), "--device", args.device, "--model", BATCH_MODEL, "--no-progress"]
    command += eval_options(args)
    if args.device == "cuda":
        command += ["--gpus", gpus] + (["--workers", str(args.batch_workers)] if args.batch_workers else [])
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


# ----------------------------------------------------------------------------- report


def quantile(values: list[float], q: float) -> float | None:
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    pos = q * (len(values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def fmt(value, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def verdict(ok: bool | None, on_target: bool) -> str:
    if ok is None:
        return "-"
    return ("yes" if ok else "NO") if on_target else ("(yes)" if ok else "(no)")


def report(journal: Journal, info: dict, command: str) -> str:
    on_target = info.get("device") == "cuda"
    runs = [r for r in journal.rows if r["kind"] == "run"]
    last = runs[-1] if runs else {}
    lines = [
        f"<!-- {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, commit {info.get('commit')}, by: {command} -->",
        "",
        f"# Evaluation throughput (issue 17), split `{last.get('split', 'h100')}`",
        "",
        f"Device: {device_text(info)}, {info.get('cpus')} CPU cores; "
        f"torch {info.get('torch')}, triton {info.get('triton')}. Settings: {last.get('settings', '-')}.",
    ]
    if not on_target:
        lines += [
            "",
            "**CPU rehearsal of the script, not the GPU figures**: reduced sizes, Triton interpreter, "
            "a shared machine. Targets are for the H200; verdicts in parentheses are only indicative.",
        ]
    # 1. kbv3 eval wall time
    lines += [
        "",
        "## 1. `kbv3 eval` wall time (fresh CLI process, start to record)",
        "",
        "| caches | evaluations | statuses | median s | p90 s | max s | median evaluator `duration_s` | target | met |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for mode, target in (("cold", TARGET_COLD_S), ("warm", TARGET_WARM_S), ("serve", TARGET_SERVE_S)):
        rows = [r for r in journal.evals(mode).values() if not r.get("stopped")]
        walls = [r["wall_s"] for r in rows]
        statuses = Counter(r.get("status") or "no record" for r in rows)
        median = quantile(walls, 0.5)
        ok = None if median is None else median <= target
        lines.append(
            f"| {mode} | {len(rows)} | {_counts(statuses)} | {fmt(median)} | {fmt(quantile(walls, 0.9))} | "
            f"{fmt(max(walls) if walls else None)} | {fmt(quantile([r.get('duration_s') for r in rows], 0.5))} | "
            f"<= {target:g} s | {verdict(ok, on_target)} |"
        )
    cold, warm = journal.evals("cold"), journal.evals("warm")
    if cold:
        lines += [
            "",
            "| problem | solution | cold s | warm s | status (warm) | sol_ms cold | sol_ms warm | baseline cached (warm) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for pid, c in cold.items():
            w = warm.get(pid, {})
            lines.append(
                f"| {pid} | {c['solution']} | {fmt(c['wall_s'], '.1f')} | {fmt(w.get('wall_s'), '.1f')} | "
                f"{w.get('status', '-')} | {fmt(c.get('sol_ms'), '.5g')} | {fmt(w.get('sol_ms'), '.5g')} | "
                f"{w.get('baseline_cached', '-')} |"
            )
    # 2. batch throughput
    batches = _latest_batches(journal)
    lines += [
        "",
        "## 2. `kbv3 eval-batch` throughput (wall time of the command)",
        "",
        "| pass | GPUs | records | statuses | wall s | s per solution | solutions/min | in-batch span s "
        "| speedup vs 1 GPU | target | met |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    single = next((b for b in batches if b["pass"] == "timed" and b["n_gpus"] == 1), None)
    for b in batches:
        done = len(b["records"])
        per = b["wall_s"] / done if done else None
        note = "" if b["complete"] else " (stopped)" if b["stopped"] else " (incomplete)"
        speedup, target, ok = "-", "-", None
        if b["pass"] == "timed" and b["n_gpus"] == 1:
            speedup, target, ok = (
                "1.00x",
                f"<= {TARGET_BATCH_S:g} s/solution",
                per is not None and per <= TARGET_BATCH_S,
            )
        elif b["pass"] == "timed" and single and len(single["records"]) and done:
            ratio = (done / b["wall_s"]) / (len(single["records"]) / single["wall_s"])
            speedup, ok = f"{ratio:.2f}x", ratio >= TARGET_SPEEDUP if b["n_gpus"] == 2 else None
            target = f">= {TARGET_SPEEDUP:g}x" if b["n_gpus"] == 2 else "-"
        lines.append(
            f"| {b['pass']} | {b['gpus']} | {done}/{b['solutions']} | {_counts(Counter(b['statuses']))} | "
            f"{b['wall_s']:.1f}{note} | {fmt(per)} | {fmt(60 / per if per else None, '.1f')} | "
            f"{fmt(span(b['records']), '.1f')} | {speedup} | "
            f"{target} | {verdict(ok, on_target)} |"
        )
    if any(b["pass"] == "timed" for b in batches):
        lines += [
            "",
            "Timed passes start with the baseline and reference caches the fill pass left; a stopped "
            "pass's throughput is records / wall time so far. Wall time is the `eval-batch` command's, "
            "start-up and Parquet output included; the in-batch span runs from the first evaluation's "
            "start to the last one's end.",
        ]
    # 3. honest solutions: batch vs eval
    honest = {pid: r for pid, r in warm.items() if r["solution"] == "honest" and r.get("sol_ms")}
    timed = [b for b in batches if b["pass"] == "timed"]
    lines += ["", "## 3. Honest solutions: `sol_ms` in the batch vs `kbv3 eval` alone (warm)", ""]
    if honest and timed:
        lines += [
            "| problem | eval sol_ms | cold eval: sol_ms (diff) | "
            + " | ".join(f"batch GPUs {b['gpus']}: sol_ms (diff)" for b in timed)
            + " |",
            "|---|---|---|" + "---|" * len(timed),
        ]
        diffs = []
        for pid, r in honest.items():
            cells = []
            for b in timed:
                ms = next((x.get("sol_ms") for x in b["records"] if x["problem_id"] == pid), None)
                if ms:
                    diffs.append(abs(ms - r["sol_ms"]) / r["sol_ms"])
                    cells.append(f"{ms:.5g} ({100 * (ms - r['sol_ms']) / r['sol_ms']:+.2f}%)")
                else:
                    cells.append("-")
            c = cold.get(pid, {}).get("sol_ms")
            ref = f"{c:.5g} ({100 * (c - r['sol_ms']) / r['sol_ms']:+.2f}%)" if c else "-"
            lines.append(f"| {pid} | {r['sol_ms']:.5g} | {ref} | " + " | ".join(cells) + " |")
        within = sum(d <= TARGET_AGREE for d in diffs)
        ok = bool(diffs) and within == len(diffs)
        lines += [
            "",
            f"Batch vs eval: {within}/{len(diffs)} within {100 * TARGET_AGREE:g}% (target: all): "
            f"{verdict(ok if diffs else None, on_target)}. The cold-eval column is two `kbv3 eval` runs "
            "of the same solution against each other: the noise floor of the comparison.",
        ]
    else:
        lines.append("No honest solution was timed both by `kbv3 eval` (warm) and in a timed batch.")
    # 4. phases
    passes = [(f"eval {m}", [r.get("phase_s") or {} for r in journal.evals(m).values()]) for m in ("cold", "warm")]
    passes += [(f"batch {b['pass']} {b['gpus']}", [x.get("phase_s") or {} for x in b["records"]]) for b in batches]
    passes = [(name, ph) for name, ph in passes if ph]
    names = sorted({k for _, ph in passes for p in ph for k in p}, key=_phase_order)
    lines += ["", "## 4. Seconds per phase (`phase_s`): median / p90 over the records", ""]
    if names:
        lines += [
            "| phase | " + " | ".join(f"{name} (n={len(ph)})" for name, ph in passes) + " |",
            "|---|" + "---|" * len(passes),
        ]
        for key in names:
            cells = []
            for _, ph in passes:
                values = [p[key] for p in ph if key in p]
                cells.append(f"{fmt(quantile(values, 0.5))} / {fmt(quantile(values, 0.9))}" if values else "-")
            lines.append(f"| {key} | " + " | ".join(cells) + " |")
        lines += [
            "",
            "`candidate` holds the `solution_*` phases and any wait for the solution process's zygote, "
            "which imports torch while the reference and baseline phases run (a short baseline phase "
            "moves that wait into `candidate`). The CLI wall time of section 1 adds the CLI's own "
            "start-up to the evaluator's `duration_s`.",
        ]
    lines += wall_section(journal)
    return "\n".join(lines) + "\n"


EXIT_PART = "process_exit"  # this script's wall less the record's: printing it and the exit


def wall_parts(rows: list[dict]) -> tuple[list[str], dict[str, list[float]], dict[str, list[float]]]:
    """The named parts of `kbv3 eval` processes' wall, in the order they ran: each record's
    `wall_phase_s`, then `process_exit` (what came after the record: this script's wall less the
    record's `wall_s`); and what ran beside them (`wall_background_s`). Values per part, one per
    row that has it."""
    order: list[str] = []
    parts: dict[str, list[float]] = {}
    beside: dict[str, list[float]] = {}
    for row in rows:
        named = dict(row.get("wall_phase_s") or {})
        if named and row.get("record_wall_s") is not None and row.get("wall_s") is not None:
            named[EXIT_PART] = round(row["wall_s"] - row["record_wall_s"], 3)
        for name, seconds in named.items():
            if name not in parts:
                order.append(name)
                parts[name] = []
            parts[name].append(seconds)
        for name, seconds in (row.get("wall_background_s") or {}).items():
            beside.setdefault(name, []).append(seconds)
    return order, parts, beside


def wall_section(journal: Journal) -> list[str]:
    """Section 5: the median and p90 of every named part of a `kbv3 eval` process, per pass."""
    passes = [(m, [r for r in journal.evals(m).values() if not r.get("stopped")]) for m in ("cold", "warm", "serve")]
    passes = [(m, rows, wall_parts(rows)) for m, rows in passes if rows]
    lines = ["", "## 5. Every second of a `kbv3 eval` process (`wall_phase_s`): median / p90 per part", ""]
    order = []
    for _, _, (names, _, _) in passes:
        order += [n for n in names if n not in order]
    if not order:
        return lines + ["No record carries `wall_phase_s` (records of a kbv3 before issue 42)."]
    lines += ["| part | " + " | ".join(f"{m} (n={len(rows)})" for m, rows, _ in passes) + " |"]
    lines.append("|---|" + "---|" * len(passes))

    def cells(pick) -> str:
        out = []
        for _, rows, parsed in passes:
            values = pick(rows, parsed)
            out.append(f"{fmt(quantile(values, 0.5))} / {fmt(quantile(values, 0.9))}" if values else "-")
        return " | ".join(out)

    for name in order:
        lines.append(f"| {name} | " + cells(lambda rows, parsed, n=name: parsed[1].get(n, [])) + " |")
    lines.append("| **wall (this script's clock)** | " + cells(lambda rows, parsed: [r["wall_s"] for r in rows]) + " |")
    beside = sorted({n for _, _, parsed in passes for n in parsed[2]})
    for name in beside:
        lines.append(f"| beside: {name} | " + cells(lambda rows, parsed, n=name: parsed[2].get(n, [])) + " |")
    lines += [
        "",
        "Each record's parts add up to its `wall_s` (`unattributed` is the remainder); `process_exit` is "
        "this script's wall less the record's (printing it, the interpreter's exit). Medians of parts "
        "do not add up to the median wall. `beside:` rows ran beside the named parts and are in none "
        "of them: the zygote's start (hidden unless `solution_zygote_wait` shows it), the MPS daemon's "
        "start and client probe (hidden behind `supervisor_import` unless `mps_daemon` / `mps_probe` show it).",
    ]
    return lines


PHASES = ["reference", "baseline", "candidate", "solution_zygote_wait", "solution_spawn", "solution_start"]
PHASES += ["solution_setup", "solution_cases"]
PHASES += ["solution_timing", "cleanup"]


def device_text(info: dict) -> str:
    if info.get("device") == "cpu":
        return "CPU only"
    return f"{info.get('gpus')} x {info.get('name')}"


def _phase_order(name: str) -> tuple[int, str]:
    return (PHASES.index(name) if name in PHASES else len(PHASES), name)


def span(records: list[dict]) -> float | None:
    """Seconds from the first evaluation's start to the last one's end, from the records."""
    times = [
        (datetime.fromisoformat(r["started_at"]).timestamp(), r.get("duration_s") or 0.0)
        for r in records
        if r.get("started_at")
    ]
    return max(t + d for t, d in times) - min(t for t, _ in times) if times else None


def _counts(counter: Counter) -> str:
    return ", ".join(f"{n} {s}" for s, n in sorted(counter.items(), key=lambda kv: str(kv[0]))) or "-"


def _latest_batches(journal: Journal) -> list[dict]:
    latest: dict[tuple[str, str], dict] = {}
    for r in journal.rows:
        if r["kind"] == "batch":
            latest[(r["pass"], r["gpus"])] = r
    return sorted(latest.values(), key=lambda b: (b["pass"] != "fill", -b["n_gpus"]))


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
    parser.add_argument("--parts", default="eval,serve,batch", help="eval, serve, batch (comma list; default all)")
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
        args.batch_limit = 3 if args.batch_limit is None else args.batch_limit
        args.timing_seconds = 0.5 if args.timing_seconds is None else args.timing_seconds
        args.seeds = args.seeds or "42"
        args.no_other_shape = True
        args.budget = 600.0 if args.budget is None else args.budget
    args.evals = 20 if args.evals is None else args.evals
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
    if args.device == "cpu":
        problems = [p for p in problems if not p.cpu_unsupported]
    chosen = pick_evals(problems, args.evals)
    env = environment(work)
    parts = set(args.parts.split(","))
    if "eval" in parts:
        gpu_env = dict(env, CUDA_VISIBLE_DEVICES=args.gpus.split(",")[0]) if args.device == "cuda" else env
        for mode, share in (("cold", 0.4), ("warm", 0.55)):
            done = journal.evals(mode)
            todo = [p for p in chosen if p.problem_id not in done or done[p.problem_id].get("stopped")]
            if mode == "warm":  # the same evaluations the cold pass finished
                todo = [p for p in todo if p.problem_id in journal.evals("cold")]
            for i, p in enumerate(todo):
                if time.monotonic() > started + share * args.budget:
                    print(f"[{mode}] budget share used: {len(todo) - i} left unstarted", flush=True)
                    break
                one_eval(p, mode, args, gpu_env, deadline, journal)
    if "serve" in parts:
        gpu_env = dict(env, CUDA_VISIBLE_DEVICES=args.gpus.split(",")[0]) if args.device == "cuda" else env
        serve_pass(chosen, args, gpu_env, work, min(deadline, started + 0.65 * args.budget), journal)
    if "batch" not in parts:
        return
    batch = build_batch(work / "solutions", problems, chosen, args.batch_limit)
    n = len(batch)
    fill = journal.batch("fill", args.gpus)
    if fill is None or not fill["complete"]:
        # Leave the timed passes what they should need at the target pace (x1.25), at most 40%.
        need = sum(1.25 * TARGET_BATCH_S * n / len(s.split(",")) for s in sets)
        need = min(need, 0.4 * args.budget)
        if deadline - need - time.monotonic() > 10:
            batch_pass("fill", args.gpus, work / "solutions", n, args, env, work, deadline - need, journal)
        else:
            print("[batch fill] no time left for it: timed passes start without it", flush=True)
        fill = journal.batch("fill", args.gpus)
    filled = {r["problem_id"] for r in fill["records"]} if fill else set()
    solutions = work / "solutions"
    if fill and not fill["complete"] and filled:  # time only what the fill pass got through
        batch = [p for p in batch if p.problem_id in filled]
        build_batch(work / "solutions-filled", batch, batch, None)
        solutions, n = work / "solutions-filled", len(batch)
    for gpus in sets:
        done = journal.batch("timed", gpus)
        if done and done["complete"] and done["solutions"] == n:
            continue
        if time.monotonic() > deadline - 5:
            print(f"[batch timed {gpus}] no time left", flush=True)
            continue
        batch_pass("timed", gpus, solutions, n, args, env, work, deadline, journal)


if __name__ == "__main__":
    sys.exit(main())
