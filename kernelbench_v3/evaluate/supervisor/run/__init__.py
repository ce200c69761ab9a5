"""The run room: one evaluation end to end, as the caller's process runs it.

`run_evaluation` (`evaluation`: the problem read once, the reference, the baseline, the candidate
phase, the verdict, the record), where its seconds go (`phases`), the candidate phase (`candidate`:
the forked solution process driven step by step under limits derived from the problem) and the
warm zygotes of long-lived supervisors (`zygote_pool`), and the turns of a GPU that evaluations
share (`turns`: no solution process and no timed second beside another's). It is the only room that uses all the
others: the reference, the session, the timing room and the verdict.

The warm zygotes load without torch, so a CLI can start its zygote before it imports torch
itself (the zygote then imports it beside the CLI); the rest loads on first use (PEP 562).
"""

from typing import Any

from .turns import GPU_LOCK, SOLUTION_LOCK, GpuTurns, Lender
from .zygote_pool import close_warm_zygotes, keep_zygotes_warm, start_warm_zygote


def __getattr__(name: str) -> Any:
    if name in ("StepLimits", "step_limits"):
        from . import candidate

        return getattr(candidate, name)
    if name == "run_evaluation":
        from .evaluation import run_evaluation

        return run_evaluation
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "GPU_LOCK",
    "SOLUTION_LOCK",
    "GpuTurns",
    "Lender",
    "StepLimits",
    "close_warm_zygotes",
    "keep_zygotes_warm",
    "run_evaluation",
    "start_warm_zygote",
    "step_limits",
]
