"""The run room: one evaluation end to end, as the caller's process runs it.

`run_evaluation` (`evaluation`: the problem read once, the reference, the baseline, the candidate
phase, the verdict, the record), where its seconds go (`phases`), the candidate phase (`candidate`:
the forked solution process driven step by step under limits derived from the problem) and the
warm zygotes of long-lived supervisors (`zygote_pool`). It is the only room that uses all the
others: the reference, the session, the timing room and the verdict.
"""

from .candidate import StepLimits, step_limits
from .evaluation import run_evaluation
from .zygote_pool import keep_zygotes_warm, start_warm_zygote

__all__ = ["StepLimits", "keep_zygotes_warm", "run_evaluation", "start_warm_zygote", "step_limits"]
