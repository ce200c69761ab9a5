"""The tables of `bench_small_kernels_gpu.py`'s journal (benchmarks/results/small_kernels_gpu.md).

Bounds (the issue's): the scored time within 3% of outside at 50 us and up, within 8% at 10-50
us; the speedup within the same bound of the outside speedup (the faster of the eager reference
over rotating sets and the compiled reference by events behind a sleep, over the solution's
rotating figure); the ladder within 0.5 us of the rung's own duration by events.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path


def _bound(outside_us: float) -> float:
    return 0.03 if outside_us >= 50 else 0.08


def _fmt(v, spec=".4g") -> str:
    return "n/a" if v is None else format(v, spec)


def _net_us(r: dict) -> float | None:
    """The run's time by the current estimator (window less the echo's window), in us. Runs
    journaled before it (no `estimator` key) added the echo call's duration by events to every
    net time, a constant per evaluation: taking it back out is exact, not a new measurement."""
    if not r.get("sol_ms"):
        return None
    if r.get("estimator") == "window-echo":
        return r["sol_ms"] * 1e3
    echo_call = ((r.get("timing") or {}).get("echo_call_ms")) or 0.0
    return (r["sol_ms"] - echo_call) * 1e3


def report(journal: Path) -> str:
    entries = [json.loads(line) for line in Path(journal).read_text().splitlines() if line.strip()]
    outside = {(e["problem"], e["solution"]): e for e in entries if e.get("part") == "outside"}
    refs = {e["problem"]: e for e in entries if e.get("part") == "outside-ref"}
    evals: dict = {}
    for e in entries:
        if e.get("part") == "evaluator":
            evals.setdefault((e["mode"], e["kind"], e["problem"], e["solution"]), []).append(e)
    lines = []
    probe = next((e for e in entries if e.get("part") == "probe"), None)
    if probe:
        lines += [f"GPU: {probe.get('smi')}; torch {probe.get('torch')}", ""]
    for mode in ("mps", "plain"):
        rows = [(k, v) for k, v in evals.items() if k[0] == mode and k[1] == "honest"]
        if not rows:
            continue
        lines += [
            f"## Honest solutions, {'MPS (the default)' if mode == 'mps' else '--no-mps'}",
            "",
            "| problem | solution | outside µs | scored µs (runs) | scored / outside | window − echo µs | "
            "that / outside | bound | speedup scored / outside | verdicts and flags |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for (_, _, problem, solution), runs in rows:
            o = outside.get((problem, solution), {})
            rot = (o.get("rotating_ms") or 0) * 1e3 or None
            scored = [r["sol_ms"] * 1e3 for r in runs if r.get("sol_ms")]
            med = statistics.median(scored) if scored else None
            ref = refs.get(problem, {})
            ref_best = min(v for v in (ref.get("eager_rotating_ms"), ref.get("compiled_events_ms"), 1e9) if v)
            out_speed = ref_best * 1e3 / rot if rot and ref_best < 1e9 else None
            speeds = [r["speedup"] for r in runs if r.get("speedup")]
            speed = statistics.median(speeds) if speeds else None
            verdicts = sorted({r.get("status") or "error" for r in runs})
            flags = sorted({f for r in runs for f in (r.get("timing_flags") or [])})
            ratio = f"{(med / rot - 1) * 100:+.1f}%" if med and rot else "n/a"
            ok = "" if not (med and rot) else (" ✓" if abs(med / rot - 1) <= _bound(rot) else " ✗")
            nets = [n for n in (_net_us(r) for r in runs) if n]
            net = statistics.median(nets) if nets else None
            net_ratio = f"{(net / rot - 1) * 100:+.1f}%" if net and rot else "n/a"
            net_ok = "" if not (net and rot) else (" ✓" if abs(net / rot - 1) <= _bound(rot) else " ✗")
            lines.append(
                f"| {problem} | {runs[0]['label']} | {_fmt(rot)} | "
                f"{', '.join(f'{s:.4g}' for s in scored) or 'n/a'} ({len(runs)}) | {ratio}{ok} | "
                f"{', '.join(f'{n:.4g}' for n in nets) or 'n/a'} | {net_ratio}{net_ok} | "
                f"{_bound(rot) * 100:.0f}% | {_fmt(speed, '.3g')} / {_fmt(out_speed, '.3g')} | "
                f"{'/'.join(verdicts)}; {', '.join(flags) or 'no flags'} |"
                if rot
                else f"| {problem} | {runs[0]['label']} | n/a | {', '.join(f'{s:.4g}' for s in scored)} | n/a | | | | | "
                f"{'/'.join(verdicts)}; {', '.join(flags) or 'no flags'} |"
            )
        honest = [r for (m, k, _, _), rs in evals.items() if m == mode and k == "honest" for r in rs]
        rejected = sum(1 for r in honest if r.get("status") != "correct")
        flagged = sum(1 for r in honest if r.get("timing_flags"))
        lines += ["", f"{len(honest)} honest evaluations: {rejected} not correct, {flagged} with a timing flag.", ""]
    ladder = sorted(((k, v) for k, v in evals.items() if k[1] == "ladder"), key=lambda kv: kv[0][3])
    if ladder:
        lines += [
            "## The null-call ladder",
            "",
            "| mode | rung | rotating (one graph of calls) µs | scored µs | scored − rotating µs | "
            "window − echo µs | that − rotating µs |",
            "|---|---|---|---|---|---|---|",
        ]
        for (mode, _, problem, solution), runs in ladder:
            o = outside.get((problem, solution), {})
            rot = (o.get("rotating_ms") or 0) * 1e3 or None
            r = runs[0]
            scored = r["sol_ms"] * 1e3 if r.get("sol_ms") else None
            diff = f"{scored - rot:+.2f}" if scored and rot else (r.get("timing_note") or r.get("status") or "")[:60]
            net = _net_us(r)
            net_diff = f"{net - rot:+.2f}" if net and rot else "n/a"
            lines.append(
                f"| {mode} | {runs[0]['label']} | {_fmt(rot)} | {_fmt(scored)} | {diff} | {_fmt(net)} | {net_diff} |"
            )
        lines.append("")
    attacks = [(k, v) for k, v in evals.items() if k[1] == "attack"]
    if attacks:
        lines += ["## Done-early attacks (MPS)", "", "| attack | status | failed check | sol_ms |", "|---|---|---|---|"]
        for _key, runs in attacks:
            r = runs[0]
            lines.append(f"| {r['label']} | {r.get('status')} | {r.get('failed_check')} | {_fmt(r.get('sol_ms'))} |")
        lines.append("")
    cli = [e for e in entries if e.get("part") == "cli"]
    if cli:
        walls = sorted(e["wall_s"] for e in cli)
        lines += [
            "## `kbv3 eval` as a user runs it (its own daemon, baseline cached)",
            "",
            f"{len(cli)} evaluations: wall median {statistics.median(walls):.1f} s, max {walls[-1]:.1f} s; "
            f"duration_s median {statistics.median(e.get('duration_s') or 0 for e in cli):.1f} s; "
            f"MPS in use: {sorted({str(e.get('mps')) for e in cli})}; daemon processes and folders left "
            f"once the reaper had 15 s: {sorted({len(e.get('mps_left_after') or []) for e in cli})} "
            f"(gone after {sorted({e.get('mps_gone_after_s') for e in cli}, key=str)} s)",
            "",
        ]
    for part in ("cli-kill9", "cli-fault"):
        for e in entries:
            if e.get("part") == part:
                lines += [
                    f"`{part}`: " + json.dumps({k: v for k, v in e.items() if k not in ("key", "part")})[:1500],
                    "",
                ]
    return "\n".join(lines)
