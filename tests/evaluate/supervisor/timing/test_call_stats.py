"""The per-call estimator, its stopping rule, the doorbell's waits and the supervisor's loop,
with injected clocks and synthetic windows: nothing here measures a real time."""

from __future__ import annotations

import math
import random
import threading

import pytest
import torch

from kernelbench_v3.evaluate.protocol.doorbell import ARMED, DONE, GO, NBYTES, Doorbell, DoorbellTimeout
from kernelbench_v3.evaluate.supervisor.timing import measure as measure_module
from kernelbench_v3.evaluate.supervisor.timing import witness
from kernelbench_v3.evaluate.supervisor.timing.errors import GateTampered
from kernelbench_v3.evaluate.supervisor.timing.judging import FORGERY_ESCAPE, MIN_JUDGE_SHARE, Judging
from kernelbench_v3.evaluate.supervisor.timing.measure import LOOP_STEPS, WARM_CALLS, Feed, measure
from kernelbench_v3.evaluate.supervisor.timing.stats import CallPlan, known, quantile, should_stop, summarize
from kernelbench_v3.evaluate.supervisor.timing.timed_process import TimedProcess


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


def test_the_calls_judging_needs_raise_the_minimum_but_not_the_cap():
    plan = CallPlan(min_calls=3, max_calls=100, target_rel=0.01, cap_s=5.0)
    tight = [1.0] * 10
    assert should_stop(tight, 0.1, plan) and not should_stop(tight, 0.1, plan, at_least=11)
    assert should_stop(tight + [1.0], 0.1, plan, at_least=11)
    assert should_stop(tight, 6.0, plan, at_least=11)  # the timer's cap still ends timing
    assert should_stop([1.0] * 100, 0.1, plan, at_least=500)  # and so does max_calls


def test_cuda_stops_at_a_sixth_of_the_fidelity_bound_after_twenty_calls():
    plan = CallPlan.for_device("cuda", 6.0)
    assert (plan.min_calls, plan.target_rel, plan.target_abs_s) == (20, 0.005, 0.2e-6)
    rng = random.Random(3)
    big = [1e-3 * (1 + rng.gauss(0, 0.004)) for _ in range(40)]  # a 1 ms kernel, +-0.4% per call
    assert not known(summarize(big[:19]), plan) and known(summarize(big[:20]), plan)


def test_a_small_kernel_stops_at_an_absolute_half_width():
    rng = random.Random(2)
    calls = [10e-6 + rng.gauss(0, 1.4e-6) for _ in range(800)]  # a 10 us kernel, +-1.4 us per call
    relative_only = CallPlan(min_calls=60, max_calls=2000, target_rel=0.0025, cap_s=1e9)
    with_floor = CallPlan(min_calls=60, max_calls=2000, target_rel=0.0025, cap_s=1e9, target_abs_s=0.2e-6)
    assert not known(summarize(calls), relative_only)  # 0.25% of 10 us is out of reach
    assert known(summarize(calls), with_floor)
    assert not known(summarize(calls[:59]), with_floor)  # never before min_calls


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
    return Doorbell(torch.zeros(NBYTES, dtype=torch.uint8))


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
    memory = torch.zeros(NBYTES, dtype=torch.uint8)
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


class FakeCaller:
    """A process whose windows take the given seconds, one after another; arming takes 5 us."""

    def __init__(self, seconds, arm_s=5e-6):
        self.seconds, self.sets, self.arm_s = list(seconds), [], arm_s

    def arm(self, s: int) -> float:
        self.sets.append(s)
        return self.arm_s

    def ring(self) -> float:
        return self.seconds.pop(0)


class FakeWork:
    cuda = True
    l2_bytes = 50 << 20
    flush_gpu_s = None  # no events: a timer without them

    def __init__(self, flushes, echo_call_s=2e-6, idle_flush_s=0.0):
        self.flushes, self.echo_call_s, self.idle_flush_s = list(flushes), echo_call_s, idle_flush_s

    def flush(self):
        pass

    def sync(self):
        pass

    def timed_flush(self, clock=None):
        return self.flushes.pop(0)


class PassingVerifier:
    def __init__(self):
        self.judged = []

    def check(self, label, inputs, output, float64):
        self.judged.append((label, float64))
        return ""


class Outputs:
    def of(self, s):
        return torch.zeros(2)


def _feed(written=None):
    written = [] if written is None else written
    return Feed(4, lambda: [torch.zeros(2)], lambda s, inputs: written.append(s), lambda inputs: None)


def _measure(solution_s, echo_s, flushes, judge=None, plan=None, **work):
    n = len(solution_s) - WARM_CALLS
    plan = plan or CallPlan(min_calls=n, max_calls=n, target_rel=0.0, cap_s=1e9)
    fake = FakeWork(flushes, **work)
    return measure(FakeCaller(solution_s), FakeCaller(echo_s), _feed(), fake, plan, random.Random(0), judge), fake


def test_a_calls_net_time_is_its_window_less_the_echos_and_nothing_added_back():
    # The echo call's duration by events (2 us here; 3.5-28 us under MPS on the H200) is not added:
    # the ladder put window - echo's window within a microsecond of the rotating-graph figure.
    calls, _ = _measure([1e-4] * WARM_CALLS + [110e-6, 111e-6, 109e-6], [20e-6] * 6, [30e-6] * 12)
    assert calls.nets == pytest.approx([90e-6, 91e-6, 89e-6])
    assert calls.arms == pytest.approx([5e-6] * 3) and len(calls.after_echo) == len(calls.after) == 3
    assert len(calls.preps) == len(calls.echo_preps) == 3


def test_the_inputs_are_written_after_the_caller_armed():
    order = []

    class Caller(FakeCaller):
        def arm(self, s):
            order.append("arm")
            return super().arm(s)

        def ring(self):
            order.append("ring")
            return super().ring()

    feed = Feed(4, lambda: [torch.zeros(2)], lambda s, inputs: order.append("write"), lambda inputs: None)
    plan = CallPlan(min_calls=3, max_calls=3, target_rel=0.0, cap_s=1e9)
    measure(Caller([1e-4] * 6), FakeCaller([1e-5] * 6), feed, FakeWork([3e-5] * 12), plan, random.Random(0))
    assert order[:3] == ["arm", "write", "ring"] and order.count("write") == 6


def test_every_call_to_the_last_is_judged_with_one_fixed_chance_and_the_float64_rule():
    verifier = PassingVerifier()
    now = [0.0]

    def clock():
        now[0] += 1e-3  # a judgement costs about as much as a call's loop: the chance is 1
        return now[0]

    judging = Judging(verifier, Outputs(), random.Random(0), clock)
    _measure([1e-4] * 503, [1e-5] * 503, [3e-5] * 1006, judging)
    assert judging.share == pytest.approx(1.0) and judging.verified == 503
    assert all(float64 for _, float64 in verifier.judged)
    assert verifier.judged[-1][0] == "timed call 500"


def test_an_expensive_judgement_lowers_the_chance_but_never_to_a_count():
    now = [0.0]

    class Slow(PassingVerifier):
        def check(self, label, inputs, output, float64):
            now[0] += 1.0  # a judgement costs 1 s, the loop 1e-4 s per clock reading
            return super().check(label, inputs, output, float64)

    def clock():
        now[0] += 1e-4
        return now[0]

    verifier = Slow()
    judging = Judging(verifier, Outputs(), random.Random(1), clock)
    _measure([1e-4] * 2003, [1e-5] * 2003, [3e-5] * 4006, judging)
    assert judging.share == pytest.approx(MIN_JUDGE_SHARE)
    late = [int(label.split()[-1]) for label, _ in verifier.judged[3:]]
    assert len(late) > 50 and max(late) > 1800  # judged to the end, never stopped by a count


def test_a_judged_call_is_judged_on_its_output_as_it_stood_when_the_window_closed():
    live = torch.zeros(2)

    class Caller(FakeCaller):
        def ring(self):
            live.fill_(1.0)  # what the call had written when it said DONE
            return super().ring()

    class LateWork(FakeWork):
        def timed_flush(self, clock=None):
            live.fill_(999.0)  # work the call left running past DONE lands later
            return super().timed_flush(clock)

    class Live:
        def of(self, s):
            return live

    seen = []

    class Recording(PassingVerifier):
        def check(self, label, inputs, output, float64):
            seen.append(float(output[0]))
            return super().check(label, inputs, output, float64)

    judging = Judging(Recording(), Live(), random.Random(0), echo_output=torch.zeros(2))
    plan = CallPlan(min_calls=3, max_calls=3, target_rel=0.0, cap_s=1e9)
    measure(Caller([1e-4] * 6), FakeCaller([1e-5] * 6), _feed(), LateWork([3e-5] * 12), plan, random.Random(0), judging)
    assert seen and set(seen) == {1.0}


def test_work_left_running_past_done_slows_the_flush_after_the_solution_and_is_flagged():
    honest, work = _measure([1e-4] * 13, [1e-5] * 13, [200e-6, 201e-6] * 13)
    found, failed = witness.gap(honest.after, honest.after_echo, 16 << 20, work)
    assert not failed and found["bound_ms"] > 0.201
    leftover, work = _measure([1e-4] * 13, [1e-5] * 13, [200e-6, 500e-6] * 13)
    assert witness.gap(leftover.after, leftover.after_echo, 16 << 20, work)[1]


def test_the_flushes_by_events_are_reported_beside_the_hosts_clock_and_never_judged():
    class EventWork(FakeWork):
        def timed_flush(self, clock=None):
            took = super().timed_flush(clock)
            self.flush_gpu_s = 100e-6  # the device's own seconds: the same for both sides
            return took

    # The host's clock read the flush after the caller's window 2.5x the echo's: a delayed timer
    # thread reads so too; the events say the device did the same work after both.
    calls = measure(
        FakeCaller([1e-4] * 13),
        FakeCaller([1e-5] * 13),
        _feed(),
        EventWork([200e-6, 500e-6] * 13),
        CallPlan(min_calls=10, max_calls=10, target_rel=0.0, cap_s=1e9),
        random.Random(0),
    )
    assert len(calls.after_gpu) == len(calls.after) == 10 == len(calls.after_echo_gpu)
    work = FakeWork([])
    found, failed = witness.gap(
        calls.after, calls.after_echo, 16 << 20, work, by_events=(calls.after_gpu, calls.after_echo_gpu)
    )
    assert failed and found["gpu_flush_after_solution_ms"] == pytest.approx(0.1) == found["gpu_flush_after_echo_ms"]
    assert "gpu_flush_after_echo_ms" not in witness.gap(calls.after, calls.after_echo, 16 << 20, work)[0]


def test_work_beside_the_input_write_slows_the_solutions_prep_and_is_flagged():
    assert not witness.prep([100e-6] * 10, [98e-6] * 10)[1]
    assert witness.prep([400e-6] * 10, [100e-6] * 10)[1]


def test_a_device_kept_busy_stops_timing_at_once():
    n = measure_module.BUSY_EVERY
    plan = CallPlan(min_calls=1000, max_calls=1000, target_rel=0.0, cap_s=1e9)
    calls, _ = _measure([1e-4] * 1003, [1e-5] * 1003, [30e-3] * 2006, plan=plan, idle_flush_s=50e-6)
    assert calls.busy and "busy" in calls.busy and len(calls.nets) == n
    calls, _ = _measure([1e-4] * 35, [1e-5] * 35, [60e-6] * 70, idle_flush_s=50e-6)
    assert not calls.busy and len(calls.nets) == 32


class _GateSession:
    pid = 0

    def resume(self):
        pass

    def pause(self):
        pass


def test_a_gate_found_open_or_done_before_it_is_rung_is_tampering():
    memory = torch.zeros(NBYTES, dtype=torch.uint8)
    bell = Doorbell(memory)
    process = TimedProcess(_GateSession(), bell, bell.gate_words(), 1.0, cuda=True)
    process.gated = True
    bell.write(ARMED, 1)
    process.gate.done = 1  # written by the solution's side before the timer rang
    with pytest.raises(GateTampered):
        process.arm(0)
    process.gate.done, process.gate.go = 0, 0
    assert process.arm(0) >= 0  # untouched: armed
    process.gate.done = 1
    assert process.ring() >= 0 and process.gate.go == 1  # rung: GO written, DONE seen


def test_every_timed_set_holds_valid_inputs_before_anything_reads_it():
    from kernelbench_v3.evaluate.supervisor.timing.memory import TimedMemory, set_bytes

    targets = torch.tensor([3, 0, 2], dtype=torch.int64)  # integer inputs a forward indexes by
    logits = torch.randn(3, 4)
    nbytes = 3 * set_bytes([logits, targets], 4)
    region = torch.full((nbytes,), 0xFF, dtype=torch.uint8)  # what an uninitialised region may hold
    memory = TimedMemory(region, [logits, targets], (), torch.float32, 3)
    memory.fill([logits, targets])
    for sets in memory.sets:
        assert torch.equal(sets[0], logits) and torch.equal(sets[1], targets)


def test_a_copy_behind_done_that_never_runs_retires_the_process_and_keeps_its_registration(monkeypatch):
    from kernelbench_v3.evaluate import mps
    from kernelbench_v3.evaluate.supervisor.timing import snapshot

    class Gate:
        done = 0x80000005  # what a solution left: the device's cyclic >= reads it as "not yet"

    class Driver:
        unregistered: list = []

        def unregister(self, address):
            self.unregistered.append(address)

    class Never:  # an event on a stream whose wait is never satisfied
        def record(self, stream):
            pass

        def query(self):
            return False

    monkeypatch.setattr(snapshot.torch.cuda, "Event", lambda: Never())
    monkeypatch.setattr(snapshot, "COPY_WAIT_S", 0.05)
    monkeypatch.setattr(mps, "_UNUSABLE", [])
    shots = snapshot.Snapshots(on_device=False)
    shots.on_device, shots.driver, shots.stream = True, Driver(), object()
    gate = Gate()
    shots._queued[id(gate)], shots._mapped[id(gate)] = (gate, 7), 4096
    with pytest.raises(snapshot.SnapshotLost):
        shots.release()
    assert gate.done == 7  # DONE = seq written whatever the solution left there
    assert Driver.unregistered == []  # never dropped under a pending wait
    assert "unfit" in mps.cuda_context_lost()


def test_without_mps_the_gap_margin_is_the_measured_noise_and_catches_a_gemm_done_early():
    # The red team's plain-mode forgery: a 0.49 ms GEMM that wrote DONE 0.12 ms before its end,
    # behind an echo's flush of about 0.2 ms; honest medians read at most +8.6 us over the echo's.
    work = FakeWork([], idle_flush_s=80e-6)
    out = 64 << 20  # a 4096 x 4096 float32 output: more than the L2
    echo = [200e-6] * 9
    assert witness.gap([320e-6] * 9, echo, out, work, under_mps=True)[1] is False  # passed before
    found, failed = witness.gap([320e-6] * 9, echo, out, work, under_mps=False)
    assert failed and found["bound_ms"] == pytest.approx(0.2 * 1.15 + 0.03 + 0.04)
    assert not witness.gap([208.6e-6] * 9, echo, out, work, under_mps=False)[1]  # the honest worst
    # No idle figure (never calibrated): the wide margin, as under MPS
    assert not witness.gap([320e-6] * 9, echo, out, FakeWork([]), under_mps=False)[1]


def test_a_heavy_models_late_flush_passes_within_a_share_of_its_call_and_no_further():
    # On an H100 honest 27-31 ms attention models read 0.41 ms after their calls against the
    # echo's 0.15 ms: about 1% of the call, over the margins that suit short calls.
    work = FakeWork([])
    echo, out = [150e-6] * 9, 32 << 20
    assert witness.gap([410e-6] * 9, echo, out, work, under_mps=True)[1]  # the margins alone
    found, failed = witness.gap([410e-6] * 9, echo, out, work, under_mps=True, call_s=27e-3)
    assert not failed and found["bound_ms"] == pytest.approx(0.15 + 0.02 * 27)
    assert witness.gap([(150 + 0.025 * 27e3) * 1e-6] * 9, echo, out, work, under_mps=True, call_s=27e-3)[1]
    # A short call gains nothing from it: the plain GEMM done 0.12 ms early is still caught.
    plain = FakeWork([], idle_flush_s=80e-6)
    assert witness.gap([320e-6] * 9, [200e-6] * 9, 64 << 20, plain, under_mps=False, call_s=0.37e-3)[1]


def _judging_at(share: float) -> Judging:
    judging = Judging(PassingVerifier(), Outputs(), random.Random(0))
    judging.share = share
    return judging


def test_judging_needs_the_calls_that_catch_a_forgery_of_half_of_them():
    assert _judging_at(None).calls_needed() == 0 and _judging_at(1.0).calls_needed() == 0
    for share in (MIN_JUDGE_SHARE, 0.24, 0.5, 0.7, 0.9):
        n = _judging_at(share).calls_needed()
        assert (1 - share) ** (n / 2) <= FORGERY_ESCAPE < (1 - share) ** ((n - 1) / 2)
    assert _judging_at(0.5).calls_needed() == 20


def test_timing_runs_until_judging_has_had_its_chance_at_a_forgery():
    now = [0.0]

    class Slow(PassingVerifier):
        def check(self, label, inputs, output, float64):
            now[0] += 1.0  # a judgement costs far more than the loop: the chance falls to its floor
            return super().check(label, inputs, output, float64)

    def clock():
        now[0] += 1e-4
        return now[0]

    judging = Judging(Slow(), Outputs(), random.Random(1), clock)
    known_at_once = CallPlan(min_calls=3, max_calls=2000, target_rel=1.0, cap_s=1e9)
    calls, _ = _measure([1e-4] * 2003, [1e-5] * 2003, [3e-5] * 4006, judging, plan=known_at_once)
    assert judging.share == pytest.approx(MIN_JUDGE_SHARE)
    assert len(calls.nets) == judging.calls_needed() == 270


def test_each_scored_call_records_where_the_loops_time_went():
    calls, _ = _measure([1e-4] * 8, [1e-5] * 8, [3e-5] * 16)
    assert set(calls.steps) == set(LOOP_STEPS)
    assert all(len(calls.steps[step]) == len(calls.nets) == 5 for step in LOOP_STEPS)
    assert all(t >= 0 for times in calls.steps.values() for t in times)
