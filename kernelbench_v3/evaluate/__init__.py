"""The local evaluator: is a solution correct (in ways that cannot be gamed) and how fast is it.

Public API:

    from kernelbench_v3.evaluate import EvalRequest, Record, evaluate
    record = evaluate(EvalRequest("level1/23_Softmax", "sol.py", device="cpu"))

`evaluate` never raises for a bad solution: crashes, hangs, wrong answers and cheats all come
back as a Record with `correct=False` and the reason. It raises only for bad requests (unknown
problem, missing solution file).

Trust lives in one process. The supervisor (`supervisor`, in the caller's process) never
imports the solution; it computes the reference (`reference`), gets the baseline (`baseline`,
in a child that runs only reference code), and has a zygote (`zygote`) fork a fresh solution
process (`worker`) that enters a sandbox (`sandbox`) before it imports the solution. The two talk
over a data-only channel (`channel`, `messages`, `session`); the supervisor judges
(`verdict`, `checks`, `kernel_rule`) and times (`clock` over `timing`) with its own clock.
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
    from .supervisor import run_evaluation

    return run_evaluation(request, problems_dir=problems_dir, cache_dir=cache_dir)
