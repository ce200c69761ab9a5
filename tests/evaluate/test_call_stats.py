"""The per-call estimator, its stopping rule, the doorbell's waits and the supervisor's loop,
with injected clocks and synthetic windows: nothing here measures a real time."""

from __future__ import annotations

import math
import random
import threading

import pytest
import torch

from kernelbench_v3.evaluate.protocol.doorbell import ARMED, DONE, GO, Doorbell, DoorbellTimeout
from kernelbench_v3.evaluate.supervisor import clock, physics
from kernelbench_v3.evaluate.supervisor.timing.stats import CallPlan, known, quantile, should_stop, summarize


def test_the_summary_is_the_median_with_an_order_statistic_interval():
    values = [float(v) for v in range(1, 102)]  # 1..101
    summary = summarize(values)
    assert summary.median_s == 51.0 and summary.p25_s == 26.0 and summary.p75_s == 76.0
    assert summary.p10_s == 11.0 and summary.p90_s == 91.0
    assert summary.ci_low_s < 51.0 < summary.ci_high_s
    # About 1.96 * sqrt(101) / 2 ~ 9.8 ranks either side of the middle.
    assert 40 <= summary.ci_low_s <= 42 and 60 <= summary.ci_high_s <= 62
    assert summary.calls == 101


def test_a_few_delayed_calls_move_neither_the_median_nor_its_interval_much():
    rng = random.Random(1)
    calls = [1.0 + rng.gauss(0, 0.001) for _ in range(200)]
    delayed = calls[:190] + [50.0] * 10  # ten calls behind a context switch
    assert summarize(delayed).median_s == pytest.approx(summarize(calls).median_s, rel=2e-3)
    assert summarize(delayed).rel_halfwidth < 0.01


def test_stopping_waits_for_min_calls_then_for_the_interval_and_caps_by_count_and_clock():
    plan = CallPlan(min_calls=10, max_calls=50, target_rel=0.01, cap_s=5.0)
    tight = [1.0] * 9
    assert not should_stop(tight, 0.1, plan)  # under min_calls
    assert should_stop(tight + [1.0], 0.1, plan)  # known: the interval is 0 wide
    noisy = [1.0 + (i % 7) * 0.2 for i in range(20)]
    assert not known(summarize(noisy), plan) and not should_stop(noisy, 1.0, plan)
    assert should_stop(noisy, 6.0, plan)  # past the cap on the timer's clock
    assert should_stop(noisy * 3, 1.0, plan)  # max_calls
    assert not should_stop([1.0, 2.0], 60.0, plan)  # fewer than three calls give no median
    with pytest.raises(ValueError):
        CallPlan(min_calls=2, max_calls=10, target_rel=0.1, cap_s=1.0)


def test_a_non_positive_median_has_no_relative_interval():
    assert math.isinf(summarize([-1.0, -1.0, -1.0]).rel_halfwidth)
    assert quantile([3.0, 1.0, 2.0], 0.5) == 2.0


class FakeClock:
    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def _bell() -> Doorbell:
    return Doorbell(torch.zeros(64, dtype=torch.uint8))


def test_the_doorbell_times_out_on_the_waiters_clock_and_notices_a_vanished_peer():
    bell = _bell()
    with pytest.raises(DoorbellTimeout, match="did not reach"):
        bell.wait(DONE, 1, timeout_s=1.0, spin_s=10.0, clock=FakeClock(0.01))
    with pytest.raises(DoorbellTimeout, match="went away"):
        bell.wait(DONE, 1, timeout_s=100.0, spin_s=100.0, clock=FakeClock(0.05), alive=lambda: False)
    bell.write(GO, -3)
    assert bell.wait_any(GO, (3, -3), timeout_s=1.0) == -3


def test_the_doorbell_carries_a_call_between_two_threads():
    ours, theirs = _bell(), None
    memory = torch.zeros(64, dtype=torch.uint8)
    ours, theirs = Doorbell(memory), Doorbell(memory)

    def serve():
        theirs.write(ARMED, 1)
        theirs.wait(GO, 1, timeout_s=10.0)
        theirs.write(DONE, 1)

    thread = threading.Thread(target=serve)
    thread.start()
    ours.wait(ARMED, 1, timeout_s=10.0)
    ours.write(GO, 1)
    ours.wait(DONE, 1, timeout_s=10.0)
    thread.join()


class FakeSide:
    """A process whose windows take the given seconds, one after another."""

    def __init__(self, seconds):
        self.seconds, self.sets = list(seconds), []

    def call(self, s: int) -> tuple[float, float]:
        """(from resuming, from GO): the wake-up and arming take 5 us of each window here."""
        self.sets.append(s)
        seconds = self.seconds.pop(0)
        return seconds, seconds - 5e-6


class FakeWork:
    cuda = True
    l2_bytes = 50 << 20

    def __init__(self, flushes, echo_kernel_s=2e-6):
        self.flushes, self.echo_kernel_s = list(flushes), echo_kernel_s

    def flush(self):
        pass

    def sync(self):
        pass

    def timed_flush(self):
        return self.flushes.pop(0)


class FakeMemory:
    count, out_nbytes = 4, 16 << 20

    def __init__(self):
        self.written = []

    def write(self, s, inputs):
        self.written.append(s)


class Module:
    @staticmethod
    def get_inputs():
        return [torch.zeros(2)]


class PassingVerifier:
    def __init__(self):
        self.judged = []

    def check(self, label, inputs, output, float64):
        self.judged.append((label, float64))
        return ""


class Outputs:
    def of(self, s):
        return torch.zeros(2)


def _loop(solution_s, echo_s, flushes, verifier=None):
    n = len(solution_s)
    work = FakeWork(flushes)
    loop = clock._Loop(
        FakeMemory(),
        Module,
        "cpu",
        random.Random(0),
        work,
        FakeSide(solution_s),
        FakeSide(echo_s),
        Outputs(),
        verifier or PassingVerifier(),
    )
    for _ in range(n):
        loop.one(scored=True)
    return loop


def test_a_calls_net_time_is_its_window_less_the_echos_plus_the_echo_kernel():
    loop = _loop([110e-6, 111e-6, 109e-6], [20e-6, 20e-6, 20e-6], [30e-6] * 6)
    assert loop.nets == pytest.approx([92e-6, 93e-6, 91e-6])
    assert [a for pair in loop.arms for a in pair] == pytest.approx([5e-6] * 6)
    assert len(loop.gaps_after_echo) == 3 and len(loop.gaps_after_solution) == 3


def test_the_calls_are_judged_after_they_answer_and_the_first_with_the_float64_rule():
    verifier = PassingVerifier()
    loop = _loop([1e-4] * 20, [1e-5] * 20, [3e-5] * 40, verifier)
    assert loop.verified == len(verifier.judged) > 0
    flags = [f for _, f in verifier.judged]
    assert flags[: clock.PRECISION_CHECKS] == [True] * min(clock.PRECISION_CHECKS, len(flags))
    assert not any(flags[clock.PRECISION_CHECKS :])


def test_work_left_running_past_done_slows_the_flush_after_the_solution_and_is_flagged():
    honest = _loop([1e-4] * 10, [1e-5] * 10, [30e-6, 31e-6] * 10)
    outcome = clock.TimingOutcome()
    clock._gap_check(outcome, honest)
    assert clock.GAP_WORK not in outcome.flags and outcome.details["gap"]["bound_ms"] > 0.031
    leftover = _loop([1e-4] * 10, [1e-5] * 10, [30e-6, 200e-6] * 10)
    outcome = clock.TimingOutcome()
    clock._gap_check(outcome, leftover)
    assert clock.GAP_WORK in outcome.flags


def test_work_done_between_the_resume_and_arming_is_flagged():
    class Early(FakeSide):
        def call(self, s):
            full, go = super().call(s)
            return full + 300e-6, go  # 0.3 ms of work before arming

    honest = _loop([1e-4] * 10, [1e-5] * 10, [30e-6] * 20)
    outcome = clock.TimingOutcome()
    clock._arm_check(outcome, honest)
    assert clock.WORK_BEFORE_WINDOW not in outcome.flags and outcome.details["arm"]["solution_ms"] == pytest.approx(
        0.005
    )
    early = clock._Loop(
        FakeMemory(),
        Module,
        "cpu",
        random.Random(0),
        FakeWork([30e-6] * 20),
        Early([1e-4] * 10),
        FakeSide([1e-5] * 10),
        Outputs(),
        PassingVerifier(),
    )
    for _ in range(10):
        early.one(scored=True)
    early.device = "cuda"  # the GPU's bound (a CPU host's is looser)
    outcome = clock.TimingOutcome()
    clock._arm_check(outcome, early)
    assert clock.WORK_BEFORE_WINDOW in outcome.flags


def test_physics_is_a_floor_under_every_scored_time():
    assert "not positive" in physics.impossible(0.0, "level1/26_GELU_", "NVIDIA H200", "fp32", True)
    assert "not positive" in physics.impossible(-1.27, "level1/26_GELU_", "NVIDIA H200", "fp32", True)
    assert "not positive" in physics.impossible(float("nan"), "level1/26_GELU_", "cpu", "fp32", False)
    light = physics.speed_of_light_ms("level1/26_GELU_", "NVIDIA H200", "fp32")
    assert light and light > 0
    assert "speed of light" in physics.impossible(light * 0.5, "level1/26_GELU_", "NVIDIA H200", "fp32", True)
    assert physics.impossible(light * 1.5, "level1/26_GELU_", "NVIDIA H200", "fp32", True) == ""
    # Other sizes or an unknown device: only the sign is checked.
    assert physics.impossible(light * 0.5, "level1/26_GELU_", "NVIDIA H200", "fp32", False) == ""
    assert physics.impossible(1e-9, "level1/26_GELU_", "some cpu", "fp32", True) == ""
    # The H200's own roofline, not the H100's: its memory is faster.
    h100 = physics.speed_of_light_ms("level1/26_GELU_", "h100", "fp32")
    assert h100 > light
