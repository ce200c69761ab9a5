"""The throughput benchmark's journal and its table (issues 17, 42): `throughput.jsonl`, one
row per evaluation, request, batch pass or baselines run, and `throughput.md` rendered from it
alone (`bench_throughput_gpu.py` runs things and appends; this module only reads and renders)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

TARGET_COLD_S, TARGET_WARM_S, TARGET_BATCH_S, TARGET_SPEEDUP, TARGET_AGREE = 20.0, 8.0, 4.0, 1.9, 0.01
TARGET_SERVE_S = 3.0  # per `kbv3 eval --server` request to a warm `kbv3 serve` (issue 42)
TARGET_BASELINE_S = 8.0  # a cold baseline (issue 42)

# ----------------------------------------------------------------------------- journal


def is_warm(mode: str) -> bool:
    return mode == "warm" or mode.startswith("warm-")


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

    def batch(self, name: str, gpus: str, workers: int | None = None) -> dict | None:
        """The latest pass `name` on `gpus` with `workers` per GPU (None: eval-batch's default)."""
        found = [
            r
            for r in self.rows
            if r["kind"] == "batch" and r["pass"] == name and r["gpus"] == gpus and r.get("workers") == workers
        ]
        return found[-1] if found else None

    def warm_evals(self) -> list[dict]:
        """Every warm `kbv3 eval` row, all passes (`warm`, `warm-2`, ...), unstopped."""
        return [r for r in self.rows if r["kind"] == "eval" and is_warm(r["mode"]) and not r.get("stopped")]


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


def fidelity_bound(sol_ms: float) -> float:
    """How far a time may lie from another timing of the same solution (issue 38's fidelity
    bounds, as `small_kernels_report` checks them): 3% from 50 us, 8% below."""
    return 0.03 if sol_ms >= 0.05 else 0.08


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
    lines += eval_section(journal, on_target)
    lines += baseline_section(journal, on_target)
    lines += compile_section(journal)
    # 2. batch throughput
    batches = _latest_batches(journal)
    lines += [
        "",
        "## 2. `kbv3 eval-batch` throughput (wall time of the command)",
        "",
        "| pass | GPUs | workers per GPU | records | statuses | wall s | s per solution | solutions/min "
        "| in-batch span s | speedup vs 1 GPU | target | met |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
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
            f"| {b['pass']} | {b['gpus']} | {b.get('workers') or 'default'} | {done}/{b['solutions']} | {_counts(Counter(b['statuses']))} | "
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
    # 3. honest solutions: batch vs eval (the median of the warm passes)
    cold = journal.evals("cold")
    honest = {}
    for r in journal.warm_evals():
        if r["solution"] == "honest" and r.get("sol_ms"):
            honest.setdefault(r["problem"], []).append(r["sol_ms"])
    honest = {pid: {"sol_ms": quantile(values, 0.5)} for pid, values in honest.items()}
    timed = [b for b in batches if b["pass"] == "timed"]
    lines += ["", "## 3. Honest solutions: `sol_ms` in the batch vs `kbv3 eval` alone (warm)", ""]
    if honest and timed:
        lines += [
            "| problem | eval sol_ms | cold eval: sol_ms (diff) | "
            + " | ".join(f"batch {batch_label(b)}: sol_ms (diff)" for b in timed)
            + " |",
            "|---|---|---|" + "---|" * len(timed),
        ]
        diffs = []
        for pid, r in honest.items():
            cells = []
            for b in timed:
                ms = next((x.get("sol_ms") for x in b["records"] if x["problem_id"] == pid), None)
                if ms:
                    diffs.append((abs(ms - r["sol_ms"]) / r["sol_ms"], r["sol_ms"]))
                    cells.append(f"{ms:.5g} ({100 * (ms - r['sol_ms']) / r['sol_ms']:+.2f}%)")
                else:
                    cells.append("-")
            c = cold.get(pid, {}).get("sol_ms")
            ref = f"{c:.5g} ({100 * (c - r['sol_ms']) / r['sol_ms']:+.2f}%)" if c else "-"
            lines.append(f"| {pid} | {r['sol_ms']:.5g} | {ref} | " + " | ".join(cells) + " |")
        within = sum(d <= TARGET_AGREE for d, _ in diffs)
        bounded = sum(d <= fidelity_bound(ms) for d, ms in diffs)
        ok = bool(diffs) and bounded == len(diffs)
        lines += [
            "",
            f"Batch vs eval: {bounded}/{len(diffs)} within the fidelity bounds (3% from 50 us, 8% from 10 "
            f"to 50 us; target: all): {verdict(ok if diffs else None, on_target)}; {within}/{len(diffs)} within "
            f"{100 * TARGET_AGREE:g}%. The cold-eval column is two `kbv3 eval` runs "
            "of the same solution against each other: the noise floor of the comparison.",
        ]
    else:
        lines.append("No honest solution was timed both by `kbv3 eval` (warm) and in a timed batch.")
    # 4. phases
    passes = [("eval cold", [r.get("phase_s") or {} for r in journal.evals("cold").values()])]
    passes += [("eval warm", [r.get("phase_s") or {} for r in journal.warm_evals()])]
    passes += [(f"batch {b['pass']} {batch_label(b)}", [x.get("phase_s") or {} for x in b["records"]]) for b in batches]
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


def eval_section(journal: Journal, on_target: bool) -> list[str]:
    """Section 1: `kbv3 eval` wall time cold, warm (every warm pass together) and through a
    service, then problem by problem."""
    lines = [
        "",
        "## 1. `kbv3 eval` wall time (fresh CLI process, start to record)",
        "",
        "| caches | evaluations | statuses | median s | p90 s | max s | median evaluator `duration_s` | target | met |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    cold = [r for r in journal.evals("cold").values() if not r.get("stopped")]
    serve = [r for r in journal.evals("serve").values() if not r.get("stopped")]
    warm = journal.warm_evals()
    passes = len({r["mode"] for r in warm})
    for name, rows, target in (
        ("cold", cold, TARGET_COLD_S),
        (f"warm ({passes} pass{'es' if passes != 1 else ''})" if passes else "warm", warm, TARGET_WARM_S),
        ("serve", serve, TARGET_SERVE_S),
    ):
        walls = [r["wall_s"] for r in rows]
        statuses = Counter(r.get("status") or "no record" for r in rows)
        median = quantile(walls, 0.5)
        ok = None if median is None else median <= target
        lines.append(
            f"| {name} | {len(rows)} | {_counts(statuses)} | {fmt(median)} | {fmt(quantile(walls, 0.9))} | "
            f"{fmt(max(walls) if walls else None)} | {fmt(quantile([r.get('duration_s') for r in rows], 0.5))} | "
            f"<= {target:g} s | {verdict(ok, on_target)} |"
        )
    if not cold:
        return lines
    lines += [
        "",
        "| problem | solution | cold s | warm s, each pass | statuses (warm) | sol_ms cold | sol_ms warm, each pass "
        "| baseline cached (warm) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in cold:
        mine = [r for r in warm if r["problem"] == c["problem"]]
        cached = sorted({str(r.get("baseline_cached")) for r in mine}) or ["-"]
        lines.append(
            f"| {c['problem']} | {c['solution']} | {fmt(c['wall_s'], '.1f')} | "
            f"{', '.join(fmt(r['wall_s'], '.1f') for r in mine) or '-'} | "
            f"{_counts(Counter(r.get('status') for r in mine))} | {fmt(c.get('sol_ms'), '.5g')} | "
            f"{', '.join(fmt(r.get('sol_ms'), '.5g') for r in mine) or '-'} | {', '.join(cached)} |"
        )
    return lines


def baseline_section(journal: Journal, on_target: bool) -> list[str]:
    """A cold baseline's cost (issue 42: at most 8 s): in each cold `kbv3 eval` that timed one,
    what the evaluation waited (its `baseline` phase) and the child's whole work (its steps,
    waited for or beside the reference phase, less its wait for the timing lock); then `kbv3
    baselines` as a whole."""
    rows = [
        r
        for r in journal.evals("cold").values()
        if not r.get("stopped") and r.get("baseline_cached") is False and (r.get("phase_s") or {}).get("baseline")
    ]
    waited = [r["phase_s"]["baseline"] for r in rows]
    child = [baseline_child_s(r) for r in rows]
    median = quantile(waited, 0.5)
    ok = None if median is None else median <= TARGET_BASELINE_S
    lines = [
        "",
        "| a cold baseline | evaluations | median s | p90 s | max s | target | met |",
        "|---|---|---|---|---|---|---|",
        f"| waited for (`baseline` phase) | {len(waited)} | {fmt(median)} | {fmt(quantile(waited, 0.9))} | "
        f"{fmt(max(waited) if waited else None)} | <= {TARGET_BASELINE_S:g} s | {verdict(ok, on_target)} |",
        f"| the child's work (steps less its lock wait) | {len([c for c in child if c is not None])} | "
        f"{fmt(quantile(child, 0.5))} | {fmt(quantile(child, 0.9))} | "
        f"{fmt(max([c for c in child if c is not None], default=None))} | - | - |",
    ]
    for run in (r for r in journal.rows if r["kind"] == "baselines"):
        each = run["wall_s"] / run["timed"] if run["timed"] else None
        lines += [
            "",
            f"`kbv3 baselines --split`: {run['timed']} timed, {run['cached']} found cached, {run['failed']} failed "
            f"in {run['wall_s']:.1f} s{' (stopped)' if run['stopped'] else ''}"
            + (f": {each:.2f} s per problem timed." if each else "."),
        ]
        seconds = list((run.get("seconds") or {}).values())  # in the order timed
        if seconds:
            median = quantile(seconds, 0.5)
            lines += [
                "",
                "| each cold baseline of `kbv3 baselines` | baselines | first s | median s | p90 s | max s | target "
                "| met |",
                "|---|---|---|---|---|---|---|---|",
                f"| timed in (the command's seconds for it) | {len(seconds)} | {fmt(seconds[0])} | {fmt(median)} | "
                f"{fmt(quantile(seconds, 0.9))} | {fmt(max(seconds))} | <= {TARGET_BASELINE_S:g} s | "
                f"{verdict(median <= TARGET_BASELINE_S, on_target)} |",
            ]
    return lines


def compile_section(journal: Journal) -> list[str]:
    """The compile probe: one cold `kbv3 baselines --only P` per problem and inductor setting."""
    runs = [r for r in journal.rows if r["kind"] == "compile"]
    if not runs:
        return []
    settings = list(dict.fromkeys(r["setting"] for r in runs))
    problems = list(dict.fromkeys(r["problem"] for r in runs))
    lines = [
        "",
        "A cold baseline by inductor setting (`kbv3 baselines --only P`, wall s of the command, "
        "caches of its own each run; `one_thread` is `TORCHINDUCTOR_COMPILE_THREADS=1`):",
        "",
        "| problem | " + " | ".join(settings) + " | baseline (" + settings[0] + ") |",
        "|---|" + "---|" * (len(settings) + 1),
    ]
    for problem in problems:
        mine = {r["setting"]: r for r in runs if r["problem"] == problem}
        cells = [
            fmt(mine[x]["wall_s"], ".1f") + ("" if mine[x]["rc"] == 0 else f" (rc {mine[x]['rc']})")
            if x in mine
            else "-"
            for x in settings
        ]
        first = mine.get(settings[0], {}).get("result", "-")
        lines.append(f"| {problem} | " + " | ".join(cells) + f" | {first} |")
    medians = [fmt(quantile([r["wall_s"] for r in runs if r["setting"] == x], 0.5), ".1f") for x in settings]
    lines.append("| **median** | " + " | ".join(medians) + " | |")
    return lines


def baseline_child_s(row: dict) -> float | None:
    """The baseline child's steps (`baseline_*`, waited for in `phase_s` and beside in
    `wall_background_s`) less `baseline_wait`, its wait for the timing lock; None when the
    record has no steps (a kbv3 before they were recorded)."""
    steps = {}
    for part in (row.get("phase_s") or {}, row.get("wall_background_s") or {}):
        for name, seconds in part.items():
            if name.startswith("baseline_") and name not in ("baseline_rest", "baseline_wait"):
                steps[name] = steps.get(name, 0.0) + seconds
    return round(sum(steps.values()), 3) if steps else None


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
    unstopped = {m: [r for r in journal.evals(m).values() if not r.get("stopped")] for m in ("cold", "serve")}
    passes = [("cold", unstopped["cold"]), ("warm", journal.warm_evals()), ("serve", unstopped["serve"])]
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
    latest: dict[tuple, dict] = {}
    for r in journal.rows:
        if r["kind"] == "batch":
            latest[(r["pass"], r["gpus"], r.get("workers"))] = r
    return sorted(latest.values(), key=lambda b: (b["pass"] != "fill", -b["n_gpus"]))


def batch_label(batch: dict) -> str:
    """GPUs, and the workers per GPU when a pass named them."""
    return f"GPUs {batch['gpus']}" + (f", {batch['workers']} workers" if batch.get("workers") else "")
