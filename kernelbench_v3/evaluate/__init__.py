"""The local evaluator: is a solution correct (in ways that cannot be gamed) and how fast is it.

Public API:

    from kernelbench_v3.evaluate import EvalRequest, Record, evaluate
    record = evaluate(EvalRequest("level1/23_Softmax", "sol.py", device="cpu"))

`evaluate` never raises for a bad solution: crashes, hangs, wrong answers and cheats all come
back as a Record with `correct=False` and the reason. It raises only for bad requests (unknown
problem, missing solution file). Modules: `request` (EvalRequest), `record` (Record),
`runner` (the orchestration in the parent), `isolate` (child processes), `reference` and
`candidate` (what each child does), `checks`, `timing`, `baseline`, `kernels`, `fingerprint`.
"""

from __future__ import annotations

from pathlib import Path

from .record import RUNS_COLUMNS, Record
from .request import DEFAULT_SEEDS, TOLERANCE_MODES, EvalRequest

__all__ = ["DEFAULT_SEEDS", "RUNS_COLUMNS", "TOLERANCE_MODES", "EvalRequest", "Record", "evaluate"]


def evaluate(
    request: EvalRequest,
    *,
    problems_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
) -> Record:
    """Evaluate one solution; see EvalRequest. `cache_dir` holds the baseline cache
    (default `$KBV3_CACHE_DIR` or `~/.cache/kbv3`)."""
    from .runner import run_evaluation

    return run_evaluation(request, problems_dir=problems_dir, cache_dir=cache_dir)
