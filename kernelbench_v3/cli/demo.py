"""The main job on the bundled defaults, end to end: the README's first command.

Builds the Hub dataset folder from the bundled `problems/`, loads a split back through
`datasets` exactly as a user would (offline, through the card's YAML configs), materializes one
row and checks it against the problem file, then evaluates the bundled example solutions
(`examples/solutions/`) on CUDA when a GPU is present, else on CPU through the Triton
interpreter at reduced sizes. Records are appended to `OUT/records.jsonl` as each finishes.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]
# The checkout's examples when run from a source tree, else the copy a wheel ships (setup.py).
EXAMPLES_DIR = next(
    (d for d in (_PACKAGE.parent / "examples" / "solutions", _PACKAGE / "_examples") if d.is_dir()),
    _PACKAGE / "_examples",
)
# On CPU each evaluation takes about a minute (interpreter, the solution process,
# torch.compile of the baseline), so the CPU default is one example; --all-examples runs all.
CPU_DEFAULT_EXAMPLES = ("level1/23_Softmax",)


def example_solutions(examples_dir: Path = EXAMPLES_DIR) -> dict[str, Path]:
    """problem_id -> path of every bundled example solution."""
    return {
        path.relative_to(examples_dir).with_suffix("").as_posix(): path for path in sorted(examples_dir.glob("*/*.py"))
    }


def run_demo(
    out_dir: Path | str,
    split: str = "h100",
    device: str | None = None,
    all_examples: bool = False,
    say: Callable[[str], None] = print,
) -> list[dict]:
    # datasets reads HF_HUB_OFFLINE once, at import: the demo only reads a local folder.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from ..catalog.materialize import instantiate as instantiate_file
    from ..catalog.problem import get_problem
    from ..dataset.hub import build, instantiate_row, load_problems
    from ..evaluate import EvalRequest, evaluate

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")

    started = time.perf_counter()
    result = build(out_dir / "hub", overwrite=True)
    say(
        f"[1/3] built {result.out_dir} in {time.perf_counter() - started:.1f} s: "
        + ", ".join(f"{s} {n} rows" for s, n in result.counts.items())
    )

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
    if device == "cpu" and not all_examples:
        examples = {pid: p for pid, p in examples.items() if pid in CPU_DEFAULT_EXAMPLES}
    say(f"[3/3] evaluating {len(examples)} bundled example solution(s) on {device} ...")
    records = []
    journal = out_dir / "records.jsonl"
    with journal.open("a", encoding="utf-8") as sink:
        for pid, path in examples.items():
            record = evaluate(EvalRequest(pid, path, gpu=split, device=device, model="bundled-example"))
            sink.write(record.to_json() + "\n")
            sink.flush()
            records.append(record.to_dict())
            speed = f"{record.speedup:.3f}x" if record.speedup is not None else "-"
            say(
                f"    {pid:<40} correct={record.correct!s:<5} speedup={speed:<9} "
                f"kernels={','.join(record.kernel_names) or '-'}" + (f"  ({record.error})" if record.error else "")
            )
    say(f"records appended to {journal}")
    return records


def summary_json(records: list[dict]) -> str:
    return json.dumps(
        [{k: r.get(k) for k in ("problem_id", "correct", "speedup", "sol_ms", "ref_ms")} for r in records],
        indent=2,
    )
