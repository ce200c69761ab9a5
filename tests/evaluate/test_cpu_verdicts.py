"""Issue 39, end to end on the CPU: each attack class of the red team's fails the check its file
names, with the static scan off and on, and the honest controls are accepted.

The attack files say what they expect (`Expect:` with the scan on, the first word of `Without
scan:` with it off); a check that must fail as well is listed in ALSO_FAILED. The controls: the
Triton tutorial's one-program-per-row softmax at the problem's default sizes (the interpreter's
own cost for a wide block is its programs', item 4), a two-pass softmax, a two-stream softmax
(two launches over halves of the rows into one output) and a persistent grid.
"""

from __future__ import annotations

import re

import pytest

from kernelbench_v3.evaluate import EvalRequest, evaluate
from tests.paths import ATTACKS, SOLUTIONS

pytestmark = pytest.mark.slow

SIZES = {"batch_size": 4, "dim": 96}
# The problem's own sizes (an empty mapping means its REDUCED_SIZES on the CPU). On main the
# tutorial softmax failed main_work here: 39 ms "outside its programs" against 15 ms of the
# reference's compute, all of it the interpreter's and the evaluator's own cost.
DEFAULT_SIZES = {"batch_size": 256, "dim": 16384}
ATTACK_FILES = (
    "arena_inplace_numpy",
    "arena_other_set_numpy",
    "numpy_in_kernel_body",
    "torch_in_kernel_body",
    "kernel_global_rebound_in_grid",
    "kernel_hook_writes_output",
    "thread_writes_during_launch",
    "helper_forks_in_arming_gap",
)
ALSO_FAILED = {
    "arena_inplace_numpy": ("output_aliasing", "main_work"),
    "arena_other_set_numpy": (),
    "kernel_hook_writes_output": ("main_work",),
    "thread_writes_during_launch": ("main_work",),
}
HONEST = SOLUTIONS / "honest"


def _expected(name: str, scan: bool) -> str:
    text = (ATTACKS / f"{name}.py").read_text()
    if scan:
        return re.search(r"^Expect: (\w+)", text, re.M).group(1)
    return re.search(r"^Without scan: (\w+)", text, re.M).group(1)


def _evaluate(path, scan: bool, sizes=SIZES, timing_seconds=0.5):
    request = EvalRequest(
        "level1/23_Softmax",
        path,
        device="cpu",
        sizes=sizes,
        baseline=False,
        seeds=(42, 123),
        timing_seconds=timing_seconds,
        scan_source=scan,
        timeout_s=120.0,
    )
    return evaluate(request)


@pytest.mark.parametrize("scan", [False, True], ids=["scan_off", "scan_on"])
@pytest.mark.parametrize("name", ATTACK_FILES)
def test_each_attack_class_fails_its_named_check(name, scan):
    record = _evaluate(ATTACKS / f"{name}.py", scan)
    expected = _expected(name, scan)
    where = (record.status, record.failed_check, (record.error or "")[:600], record.checks)
    if expected == "same":  # harmless by construction: the verdict of the honest kernel
        assert record.correct, where
        return
    assert not record.correct and record.speedup is None, where
    assert record.failed_check == expected, where
    if not scan or expected != "source_scan":
        for check in ALSO_FAILED.get(name, ()):
            assert record.checks.get(check) == "fail", (check, where)


@pytest.mark.parametrize(
    "path, sizes",
    [
        (HONEST / "tutorial_softmax.py", DEFAULT_SIZES),
        (HONEST / "tutorial_softmax.py", SIZES),
        (HONEST / "two_pass_softmax.py", SIZES),
        (HONEST / "two_stream_softmax.py", SIZES),
        (HONEST / "persistent_softmax.py", SIZES),
        (HONEST / "nested_jit_softmax.py", SIZES),
    ],
    ids=["tutorial_default_sizes", "tutorial", "two_pass", "two_stream", "persistent", "nested_jit"],
)
def test_honest_controls_are_accepted_with_a_time(path, sizes):
    record = _evaluate(path, True, sizes=sizes)
    assert record.correct, (record.failed_check, record.error[:600])
    assert record.checks["main_work"] == "pass" and record.sol_ms and record.sol_ms > 0
