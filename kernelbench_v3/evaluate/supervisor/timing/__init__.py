"""The timing room: everything that times a call, for a solution and for its baseline alike.

Two entries on one setup (`rig.Rig`: the plan, the decoy, the timer's device work, fresh inputs)
and one summary (`rig.Figures`), both timed by `measure.measure`:

- `time_solution(SolutionTiming, seconds, rng)`: the solution's calls, against the trusted echo's
  (`echo`), each process spoken to only through its `TimedProcess` (prepare, capture, start,
  arm, ring, stop), every call liable to be judged (`judging`); a `TimingOutcome`.
- `time_reference(fn, module, template, device, seconds)`: the reference in the timer's own
  process (the baseline child: `local`), gated as a solution's call is.

Beside them: the timing region (`memory`), the copy at DONE (`snapshot`), the witnesses around
the windows (`witness`: gap, prep, busy), the estimator and its stopping rule (`stats`), the
floor below which a time is not scored (`resolution`) and every exception of timing (`errors`).
Nothing here imports the reference or the verdict: the candidate phase hands in what a solution
is timed on, and the verdict's rule for a judged call (`verdict.Verifier`, a `judging.OutputCheck`).
"""

from .device_work import calibrate_idle
from .echo import ECHO_ARENA_BYTES, echo_folder
from .errors import TimingUnavailable
from .local import time_reference
from .memory import cpu_region_bytes
from .resolution import UNRESOLVED, unresolved
from .solution import TIMING_GAP_FLAGS, TIMING_STEPS, SolutionTiming, TimingOutcome, time_solution
from .timed_process import DOORBELL_OFFSET

__all__ = [
    "DOORBELL_OFFSET",
    "ECHO_ARENA_BYTES",
    "TIMING_GAP_FLAGS",
    "TIMING_STEPS",
    "UNRESOLVED",
    "SolutionTiming",
    "TimingOutcome",
    "TimingUnavailable",
    "calibrate_idle",
    "cpu_region_bytes",
    "echo_folder",
    "time_reference",
    "time_solution",
    "unresolved",
]
