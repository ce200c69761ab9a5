"""The tables of `bench_small_kernels_gpu.py`'s journal (benchmarks/results/small_kernels_gpu.md).

Bounds (the issue's): the scored time within 3% of outside at 50 us and up, within 8% at 10-50
us; the speedup within the same bound of the outside speedup (the faster of the eager reference
over rotating sets and the compiled reference by events behind a sleep, over the solution's
rotating figure); the ladder within 0.5 us of the rung's own duration by events. Beside the
back-to-back figure, each solution's single gated call outside (`gated_in_process_ms`, one
process, no MPS) and the scored median against it under the same bound: the gate times one call
per window, and a forward whose branches run together is faster alone than back to back
(docs/timing.md, "The gate's spin").
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path


def _bound(outside_us: float) -> float:
    return 0.03 if outside_us >= 50 else 0.08


def _fmt(v, spec=".4g") -> str:
    return "n/a" if v is None else format(v, spec)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


MODE_TITLES = {
    "mps": "MPS (the default)",
    "plain": "--no-mps",
    "mps-gate-wait": "MPS, the stream's wait at GO",
    "mps-gate-spin": "MPS, the gate's spin kernel at GO",
    "mps-gate-wait-echo-graph": "MPS, the stream's wait at GO, the echo a graph behind it (TIMING_VERSION 9's default)",
    "mps-echo-graph": "MPS, the spin at GO, the echo a graph behind the spin (TIMING_VERSION 9's spin)",
    "mps-gate-wait-echo-fused": "MPS, the stream's wait at GO, the fused echo",
    "mps-gate-node": "MPS, the spin as the first node of the call's graph, the fused echo",
    "mps-gate-flat": "MPS, the call's own nodes between a spin node and a DONE node, the fused echo",
    "mps-gate-pdl": "MPS, the call's own nodes between a spin node and a DONE node by programmatic edges, the fused echo",
    "mps-gate-pdl-go": "MPS, the call's own nodes behind a spin node by programmatic edges, DONE by the stream, the fused echo",
    "mps-gate-hold": "MPS, the occupancy gate (the timer's HOLD owns every SM until GO), the held echo",
}


def _echo_modes(r: dict) -> str:
    """The echo's windows of one evaluation, p10 / p50 / p90 us, and the share of them more than
    4 us above the fastest (the slow mode seen on the H200 under MPS, about 7 us above the fast)."""
    raw = (r.get("timing") or {}).get("raw_calls_ms") or []
    echo = [e * 1e3 for _, e in raw]
    if not echo:
        return "n/a"
    low = _quantile(echo, 0.1)
    slow = sum(1 for e in echo if e > min(echo) + 4) / len(echo)
    return f"{low:.1f} / {statistics.median(echo):.1f} / {_quantile(echo, 0.9):.1f} ({slow:.0%} slow)"


def _verdict(r: dict) -> str:
    """The status, and for a rejection the check that failed (impossible_time, timed_outputs...)."""
    status = r.get("status") or "error"
    return status if status == "correct" or not r.get("failed_check") else f"{status} ({r['failed_check']})"


def _honest_table(mode: str, rows: list, outside: dict, refs: dict) -> list[str]:
    lines = [
        f"## Honest solutions, {MODE_TITLES.get(mode, mode)}",
        "",
        "| problem | solution | outside µs | scored µs (runs) | median / outside | bound | "
        "one call outside µs | median / one call | "
        "speedup scored / outside | echo windows µs, p10 / p50 / p90 | verdicts and flags |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (_, _, problem, solution), runs in rows:
        one = ((outside.get((problem, solution)) or {}).get("gated_in_process_ms") or 0) * 1e3 or None
        rot = ((outside.get((problem, solution)) or {}).get("rotating_ms") or 0) * 1e3 or None
        scored = [r["sol_ms"] * 1e3 for r in runs if r.get("sol_ms")]
        med = statistics.median(scored) if scored else None
        ref = refs.get(problem, {})
        ref_best = min(v for v in (ref.get("eager_rotating_ms"), ref.get("compiled_events_ms"), 1e9) if v)
        out_speed = ref_best * 1e3 / rot if rot and ref_best < 1e9 else None
        speeds = [r["speedup"] for r in runs if r.get("speedup")]
        speed = statistics.median(speeds) if speeds else None
        verdicts = sorted({_verdict(r) for r in runs})
        flags = sorted({f for r in runs for f in (r.get("timing_flags") or [])})
        notes = sorted({r["timing_note"][:40] for r in runs if r.get("timing_note")})
        ratio = "n/a"
        if med and rot:
            ratio = f"{(med / rot - 1) * 100:+.1f}%" + (" ✓" if abs(med / rot - 1) <= _bound(rot) else " ✗")
        one_ratio = "n/a"
        if med and one:
            one_ratio = f"{(med / one - 1) * 100:+.1f}%" + (" ✓" if abs(med / one - 1) <= _bound(rot or one) else " ✗")
        lines.append(
            f"| {problem} | {runs[0]['label']} | {_fmt(rot)} | "
            f"{', '.join(f'{s:.4g}' for s in scored) or 'n/a'} ({len(runs)}) | {ratio} | "
            f"{_bound(rot or 0) * 100:.0f}% | {_fmt(one)} | {one_ratio} | "
            f"{_fmt(speed, '.3g')} / {_fmt(out_speed, '.3g')} | "
            f"{'; '.join(_echo_modes(r) for r in runs)} | "
            f"{'/'.join(verdicts)}; {', '.join(flags) or 'no flags'}{'; ' + ' '.join(notes) if notes else ''} |"
        )
    honest = [r for _, rs in rows for r in rs]
    rejected = sum(1 for r in honest if r.get("status") != "correct")
    flagged = sum(1 for r in honest if r.get("timing_flags"))
    return lines + ["", f"{len(honest)} honest evaluations: {rejected} not correct, {flagged} with a timing flag.", ""]


def _rung_us(solution: str) -> int:
    """The rung's microseconds from its file name (ladder_20us.py -> 20), so rungs sort by size."""
    found = re.search(r"(\d+)us", solution)
    return int(found.group(1)) if found else 0


def _ladder_table(ladder: list, outside: dict) -> list[str]:
    lines = [
        "## The null-call ladder",
        "",
        "Each run's scored time less the rung's own time in one graph of calls (✓ within 0.5 µs), and less",
        "the time the rung's kernel spins (its name's microseconds, by %globaltimer).",
        "",
        "| mode | rung | rotating µs | scored − rotating µs, each run | scored − spin µs, each run | "
        "echo windows µs, each run |",
        "|---|---|---|---|---|---|",
    ]
    for (mode, _, problem, solution), runs in ladder:
        rot = ((outside.get((problem, solution)) or {}).get("rotating_ms") or 0) * 1e3 or None
        diffs, over_spin = [], []
        for r in sorted(runs, key=lambda r: r.get("run", 0)):
            if r.get("sol_ms") and rot:
                d = r["sol_ms"] * 1e3 - rot
                diffs.append(f"{d:+.2f}{' ✓' if abs(d) <= 0.5 else ' ✗'}")
                over_spin.append(f"{r['sol_ms'] * 1e3 - _rung_us(solution):+.2f}")
            else:
                diffs.append((r.get("timing_note") or r.get("status") or "")[:40])
                over_spin.append("n/a")
        lines.append(
            f"| {mode} | {runs[0]['label']} | {_fmt(rot)} | {', '.join(diffs)} | {', '.join(over_spin)} | "
            f"{'; '.join(_echo_modes(r) for r in runs)} |"
        )
    return lines + [""]


def _outside_under_mps(entries: list[dict], outside: dict) -> list[str]:
    """Each solution's outside figures in a process under MPS beside those without: what MPS
    itself costs a forward (its kernel boundaries), before any gate."""
    under = [e for e in entries if e.get("part") == "outside-mps"]
    if not under:
        return []
    lines = [
        "## Outside, in a process under MPS against without",
        "",
        "| problem | solution | rotating µs | under MPS | one gated call µs | under MPS |",
        "|---|---|---|---|---|---|",
    ]
    for e in under:
        plain = outside.get((e["problem"], e["solution"])) or {}

        def us(entry: dict, field: str) -> str:
            return _fmt((entry.get(field) or 0) * 1e3 or None)

        lines.append(
            f"| {e['problem']} | {e['label']} | {us(plain, 'rotating_ms')} | {us(e, 'rotating_ms')} | "
            f"{us(plain, 'gated_in_process_ms')} | {us(e, 'gated_in_process_ms')} |"
        )
    return lines + [""]


def ladder_gate(mode: str) -> str | None:
    """The gate a ladder mode ran under ("mps" -> "spin", "mps-gate-pdl-go" -> "pdl-go"); None
    for modes that changed more than the gate (no MPS, another echo, HOLD's blocks)."""
    if mode == "mps":
        return "spin"
    found = re.fullmatch(r"mps-gate-([a-z-]+)", mode)
    return found.group(1) if found and "-echo-" not in mode and "-blocks-" not in mode else None


def best_gate(journal: Path) -> tuple[str, dict[str, float]]:
    """The gate whose ladder came closest to the rungs' rotating figures in this journal: the
    smallest median |scored - rotating| over every run of every rung, among gates whose every
    ladder run was scored; "spin" (the default) when none is complete. Also each gate's figure."""
    entries = [json.loads(line) for line in Path(journal).read_text().splitlines() if line.strip()]
    outside = {(e["problem"], e["solution"]): e.get("rotating_ms") for e in entries if e.get("part") == "outside"}
    offsets: dict[str, list[float]] = {}
    broken: set[str] = set()
    for e in entries:
        gate = ladder_gate(e.get("mode") or "") if e.get("part") == "evaluator" and e.get("kind") == "ladder" else None
        if gate is None:
            continue
        rot = outside.get((e["problem"], e["solution"]))
        if not (rot and e.get("sol_ms") and e.get("status") == "correct"):
            broken.add(gate)
            continue
        offsets.setdefault(gate, []).append(abs(e["sol_ms"] - rot) * 1e3)
    figures = {g: statistics.median(v) for g, v in offsets.items() if g not in broken}
    return (min(figures, key=figures.__getitem__) if figures else "spin"), figures


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
    for mode in sorted({k[0] for k in evals}, key=lambda m: (m != "mps", m)):
        rows = [(k, v) for k, v in evals.items() if k[0] == mode and k[1] == "honest"]
        if rows:
            lines += _honest_table(mode, rows, outside, refs)
    gated = [e for e in outside.values() if e.get("gated_in_process_ms")]
    if gated:
        lines += [
            "## One gated call in one process, against back-to-back calls",
            "",
            "No MPS, no second process, no echo: the window of wait(GO) -> the forward's graph -> DONE less "
            "that of a graph of one tiny kernel; then the same with a tiny kernel ahead of the graph.",
            "",
            "| problem | solution | rotating µs | gated µs | gated behind a kernel µs |",
            "|---|---|---|---|---|",
            *(
                f"| {e['problem']} | {e['label']} | {_fmt(e['rotating_ms'] * 1e3)} | "
                f"{_fmt(e['gated_in_process_ms'] * 1e3)} | {_fmt((e.get('gated_behind_kernel_ms') or 0) * 1e3 or None)} |"
                for e in gated
            ),
            "",
        ]
    lines += _outside_under_mps(entries, outside)
    ladder = sorted(
        ((k, v) for k, v in evals.items() if k[1] == "ladder"), key=lambda kv: (kv[0][0], _rung_us(kv[0][3]))
    )
    if ladder:
        lines += _ladder_table(ladder, outside)
    attacks = [(k, v) for k, v in evals.items() if k[1] == "attack"]
    if attacks:
        lines += [
            "## Attacks on the gate",
            "",
            "| mode | attack | status | failed check | sol_ms |",
            "|---|---|---|---|---|",
        ]
        for key, runs in sorted(attacks, key=lambda kv: (kv[0][0] != "mps", kv[0][0])):
            r = runs[0]
            lines.append(
                f"| {key[0]} | {r['label']} | {r.get('status')} | {r.get('failed_check')} | {_fmt(r.get('sol_ms'))} |"
            )
        lines.append("")
    cli = [e for e in entries if e.get("part") == "cli"]
    if cli:
        walls = sorted(e["wall_s"] for e in cli)
        lines += [
            "## `kbv3 eval` as a user runs it (its own daemon)",
            "",
            f"{len(cli)} evaluations: wall median {statistics.median(walls):.1f} s, max {walls[-1]:.1f} s; "
            f"baseline cached in {sum(1 for e in cli if e.get('baseline_cached'))}; "
            f"duration_s median {statistics.median(e.get('duration_s') or 0 for e in cli):.1f} s; "
            f"MPS in use: {sorted({str(e.get('mps')) for e in cli})}; daemon processes and folders left "
            f"once the reaper had 15 s: {sorted({len(e.get('mps_left_after') or []) for e in cli})} "
            f"(gone after {sorted({e.get('mps_gone_after_s') for e in cli}, key=str)} s)",
            "",
            "| problem | gate | run | baseline cached | wall s | duration_s | status | sol µs | speedup |",
            "|---|---|---|---|---|---|---|---|---|",
            *(
                f"| {e['problem']} | {e.get('gate') or 'default'} | {e['run']} | {e.get('baseline_cached')} | {e['wall_s']} | "
                f"{e.get('duration_s')} | {e.get('status')} | "
                f"{_fmt((e.get('sol_ms') or 0) * 1e3 or None)} | {_fmt(e.get('speedup'), '.3g')} |"
                for e in cli
            ),
            "",
            *_wall_parts(cli),
        ]
    for part in ("cli-kill9", "cli-fault"):
        for e in entries:
            if e.get("part") == part:
                lines += [
                    f"`{part}`: " + json.dumps({k: v for k, v in e.items() if k not in ("key", "part")})[:1500],
                    "",
                ]
    lines += _gate_modes(journal.parent)
    lines += _hold_spread(journal.parent)
    return "\n".join(lines)


def _wall_parts(cli: list[dict]) -> list[str]:
    """The median of each named part of the CLI's wall time (`wall_phase_s`), where journaled."""
    parts: dict[str, list[float]] = {}
    for e in cli:
        for name, s in (e.get("wall_phase_s") or {}).items():
            parts.setdefault(name, []).append(s)
    if not parts:
        return []
    cells = ", ".join(f"{name} {statistics.median(v):.2f}" for name, v in parts.items())
    return [f"Median seconds of each part of the CLI's wall (`wall_phase_s`): {cells}.", ""]


def _gate_modes(folder: Path) -> list[str]:
    """`gate_modes_gpu.py`'s windows, if its journal lies beside this one."""
    found = [p for p in (folder / "gate_modes.jsonl", folder / "gate_modes_gpu.jsonl") if p.exists()]
    if not found:
        return []
    lines = [
        "## The gate's parts one by one (`diagnostics/gate_modes_gpu.py`)",
        "",
        "| mode | variant | client 0 window µs, p10 / p50 / p90 (slow share) | client 1 | note |",
        "|---|---|---|---|---|",
    ]
    for line in found[0].read_text().splitlines():
        e = json.loads(line)

        def client(c: dict | None) -> str:
            if not c:
                return ""
            return f"{c['p10_us']} / {c['p50_us']} / {c['p90_us']} ({c['slow_share']:.0%})"

        note = e.get("error", "")
        if e.get("variant") == "edges":
            note = f"per kernel in a graph: torch {e.get('torch_us_per_kernel')} µs, Triton {e.get('triton_us_per_kernel')} µs"
        lines.append(
            f"| {e.get('mode')} | {e.get('variant', '')} | {client(e.get('client0'))} | {client(e.get('client1'))} | {note} |"
        )
    return lines + [""]


def _hold_spread(folder: Path) -> list[str]:
    """`hold_spread_gpu.py`'s placements, if its journal lies beside this one."""
    found = [p for p in (folder / "hold_spread.jsonl", folder / "hold_spread_gpu.jsonl") if p.exists()]
    if not found:
        return []
    entries = [json.loads(line) for line in found[0].read_text().splitlines() if line.strip()]
    probe = next((e for e in entries if e.get("variant") == "probe"), {})
    lines = [
        "## Where a held call's blocks land (`diagnostics/hold_spread_gpu.py`)",
        "",
        f"{probe.get('gpu', '?')}, MPS {probe.get('mps', '?')}. A grid of FMA chains launched on an idle GPU, and "
        "queued behind HOLD released with each delay (0: each block leaves as it reads the release; else all "
        "at one deadline), HOLD in blocks of 1024 threads unless named. Opens: the first block's start less "
        "HOLD's exit deadline. Medians over the trials.",
        "",
        "| threads x grid | launch | SMs used (min) | most blocks on one SM | span µs | starts' spread µs | opens µs |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        if e.get("variant") not in ("idle", "hold", "absorb"):
            continue
        launch = {"idle": "idle GPU", "hold": "HOLD", "absorb": "HOLD, an empty kernel of its shape ahead"}[
            e["variant"]
        ]
        launch += f" in blocks of {e['hold_threads']}" if e.get("hold_threads") else ""
        launch += f", delay {e.get('release_delay_ns')} ns" if e["variant"] != "idle" else ""
        if "error" in e:
            lines.append(f"| {e['threads']} x {e['grid']} | {launch} | {e['error']} | | | | |")
            continue
        opens = f"{e['open_us_median']:g}" if "open_us_median" in e else ""
        lines.append(
            f"| {e['threads']} x {e['grid']} | {launch} | {e['sms_median']:g} ({e['sms_min']}) | "
            f"{e['most_on_one_sm_median']:g} | {e['span_us_median']:g} | {e['start_spread_us_median']:g} | {opens} |"
        )
    return lines + [""]
