"""The verdict room: what the supervisor decides about a solution, from facts it gathered itself.

`judge` (`judgement`: `SolutionFacts` in, every named check and the status out), the comparison of
one output with the reference's (`compare`: the tolerance rules, the precision rule, the order
checks are reported in, and `Verifier`, the same rules for a judged timed call), the
custom-kernel rule from sampled evidence (`kernel_rule`), the speed-of-light floor (`physics`:
`impossible_time`), the static scan of the source (`tamper_scan` with `scan_names`,
`scan_reach`, `scan_rules`) and the record's scored figures (`scoring.fill_timing`: no time for
a rejected solution, none below the gate's floor). It reads what the timing room measured
(`timing.TimingOutcome`) and never imports the reference: the reference uses its rules.
"""

from .compare import PRECISION_MARGIN, V3_TOLERANCE, Verifier, all_finite
from .judgement import SolutionFacts, compare_outputs, judge
from .kernel_rule import MAIN_WORK_SHARE, forbidden_ops
from .scoring import fill_timing, problem_speed_of_light_ms
from .tamper_scan import scan

__all__ = [
    "MAIN_WORK_SHARE",
    "PRECISION_MARGIN",
    "V3_TOLERANCE",
    "SolutionFacts",
    "Verifier",
    "all_finite",
    "compare_outputs",
    "fill_timing",
    "forbidden_ops",
    "judge",
    "problem_speed_of_light_ms",
    "scan",
]
