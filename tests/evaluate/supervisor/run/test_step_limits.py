"""`--timeout` is what a hang costs at most, whichever step hangs (issue 39, item 5): with a
timeout given, no step of the solution process gets a longer limit."""

from __future__ import annotations

import dataclasses

from kernelbench_v3.evaluate import EvalRequest
from kernelbench_v3.evaluate.supervisor.run import step_limits


def test_every_step_limit_holds_the_timeout():
    request = EvalRequest("level1/23_Softmax", "x.py", device="cpu", timeout_s=20.0)
    limits = step_limits(request, reference_s=5.0, cases=10)
    over = {f.name: getattr(limits, f.name) for f in dataclasses.fields(limits) if getattr(limits, f.name) > 20.0}
    assert not over, over


def test_without_a_timeout_the_capture_may_compile_beyond_a_window():
    request = EvalRequest("level1/23_Softmax", "x.py", device="cuda")
    limits = step_limits(request, reference_s=5.0, cases=10)
    assert limits.capture > limits.window
