"""The main job on the bundled defaults, end to end: the README's first command.

Builds the Hub dataset folder from the bundled `problems/`, loads a split back through
`datasets` exactly as a user would (offline, through the card's YAML configs), materializes one
row and checks it against the problem file, then evaluates every bundled example solution of the
split (`examples/solutions/`): on CUDA at default sizes with the baseline and a speedup; on CPU
through the Triton interpreter at reduced sizes, with every check but without the baseline
(CPU timing tests the machinery, it is no performance figure, so there is no speedup to score)
and a short timing budget. Each evaluation prints a line when it starts and every few seconds
while it runs, so the demo is never silent. Records are written to `OUT/records.jsonl` as each
finishes (`kbv3 report OUT/records.jsonl` prints them as a table); a rerun replaces the previous
run's records instead of appending duplicates. `datasets`' own progress bars are silenced while
the split loads: the demo's numbered steps are its progress.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from .heartbeat import HEARTBEAT_S, heartbeat

_PACKAGE = Path(__file__).resolve().parents[1]
# The checkout's examples when run from a source tree, else the copy a wheel ships (setup.py).
EXAMPLES_DIR = next(
    (d for d in (_PACKAGE.parent / "examples" / "solutions", _PACKAGE / "_examples") if d.is_dir()),
    _PACKAGE / "_examples",
)
CPU_TIMING_SECONDS = 1.0  # per timed function on CPU: enough to run the timing machinery


def example_solutions(examples_dir: Path = EXAMPLES_DIR) -> dict[str, Path]:
    """problem_id -> path of every bundled example solution."""
    return {
        path.relative_to(examples_dir).with_suffix("").as_posix(): path for path in sorted(examples_dir.glob("*/*.py"))
    }


def run_demo(
    out_dir: Path | str,
    split: str = "h100",
    device: str | None = None,
    all_examples: bool = True,  # kept for compatibility: every example of the split is evaluated
    say: Callable[[str], None] = print,
) -> list[dict]:
    # datasets reads HF_HUB_OFFLINE once, at import: the demo only reads a local folder.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from ..evaluate import close_warm_zygotes, start_warm_zygote

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    # One zygote for every example, launched now: its torch import runs beside the build and the
    # load, and each evaluation forks from it warm instead of starting (and waiting for) its own.
    try:
        start_warm_zygote(device)
    except Exception:  # noqa: BLE001 - each evaluation then starts its own and reports what fails
        pass
    try:
        return _steps(out_dir, split, device, say)
    finally:
        close_warm_zygotes()


def _steps(out_dir: Path, split: str, device: str, say: Callable[[str], None]) -> list[dict]:
    """The demo's three steps (`run_demo`)."""
    import torch

    from ..catalog.materialize import instantiate as instantiate_file
    from ..catalog.problem import get_problem
    from ..dataset.hub import build, instantiate_row, load_problems
    from ..evaluate import EvalRequest, evaluate, speedup_text

    say("[1/3] building the Hub dataset folder from problems/ ...")
    started = time.perf_counter()
    result = build(out_dir / "hub", overwrite=True)
    say(
        f"[1/3] built {result.out_dir} in {time.perf_counter() - started:.1f} s: "
        + ", ".join(f"{s} {n} rows" for s, n in result.counts.items())
    )

    with _datasets_quiet():
        rows = load_problems(split, source=out_dir / "hub", cache_dir=str(out_dir / "hf_cache"))
    row = rows[0]
    problem = get_problem(row["problem_id"])
    from_row = instantiate_row(row, "cpu", seed=0, sizes=problem.reduced).run()
    from_file = instantiate_file(problem, "cpu", seed=0, sizes=problem.reduced).run()
    same = torch.equal(from_row, from_file)
    say(
        f"[2/3] loaded split {split!r} back through datasets: {len(rows)} rows; row "
        f"{row['problem_id']} materialized and matches its problem file bit for bit: {same}"
    )
    if not same:
        raise RuntimeError(f"row {row['problem_id']} does not reproduce its problem file")

    in_split = {r for r in rows["problem_id"]}
    examples = {pid: path for pid, path in example_solutions().items() if pid in in_split}
    on_cpu = device == "cpu"
    how = (
        "at reduced sizes through the Triton interpreter, every check, no baseline "
        "(CPU timing tests the machinery: no speedup)"
        if on_cpu
        else "at default sizes, baseline and speedup"
    )
    say(f"[3/3] evaluating {len(examples)} bundled example solution(s) on {device}, {how} ...")
    records = []
    journal = out_dir / "records.jsonl"
    # "w": a rerun starts the file afresh (appending would list every example twice); each
    # record is still flushed as it finishes, so an interrupted demo keeps what it evaluated.
    with journal.open("w", encoding="utf-8") as sink:
        for number, (pid, path) in enumerate(examples.items(), start=1):
            say(f"    ({number}/{len(examples)}) {pid} ...")
            request = EvalRequest(
                pid,
                path,
                gpu=split,
                device=device,
                model="bundled-example",
                timing_seconds=CPU_TIMING_SECONDS if on_cpu else None,
            )
            with heartbeat(pid, say, HEARTBEAT_S):
                record = evaluate(request)
            sink.write(record.to_json() + "\n")
            sink.flush()
            records.append(record.to_dict())
            say(
                f"    ({number}/{len(examples)}) {pid:<40} {record.status:<9} speedup: {speedup_text(record)}  "
                f"kernels={','.join(record.kernel_names) or 'none'}  {record.duration_s or 0:.0f} s"
                + (f"  (failed check {record.failed_check}: {_first(record.error)})" if not record.correct else "")
            )
    correct = sum(r["correct"] for r in records)
    say(f"{correct} of {len(records)} correct; records written to {journal} (kbv3 report {journal})")
    return records


@contextlib.contextmanager
def _datasets_quiet():
    """`datasets`' "Generating ... split" bars off while the block runs, as they were after."""
    import datasets

    enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if enabled:
            datasets.enable_progress_bars()


def _first(text: str | None) -> str:
    return (text or "").strip().splitlines()[0][:160] if (text or "").strip() else ""


def summary_json(records: list[dict]) -> str:
    return json.dumps(
        [{k: r.get(k) for k in ("problem_id", "correct", "speedup", "sol_ms", "ref_ms")} for r in records],
        indent=2,
    )
