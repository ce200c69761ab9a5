"""Phase accounting (`supervisor.phases`): a lap timer's steps add up to their phase, on a fake
clock (no measured time is asserted)."""

from __future__ import annotations

import pytest

from kernelbench_v3.evaluate.record import Record
from kernelbench_v3.evaluate.supervisor.run import phases
from tests.fakes import FakeClock


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock(100.0)
    monkeypatch.setattr(phases.time, "monotonic", fake)
    return fake


def test_laps_give_every_moment_to_one_step_and_sum_to_the_phase(clock):
    rec = Record()
    laps = phases.Laps(rec, "candidate", "solution_arena")
    clock.now += 0.25
    laps.to("solution_spawn")
    clock.now += 1.0
    for _ in range(3):  # a step entered again accumulates
        laps.to("solution_inputs")
        clock.now += 0.1004
        laps.to("solution_cases")
        clock.now += 0.2
        laps.to("solution_outputs")
        clock.now += 0.0503
    laps.to("solution_close")
    clock.now += 0.5
    laps.stop()
    laps.stop()  # a second stop adds nothing
    assert rec.phase_s == {
        "solution_arena": 0.25,
        "solution_spawn": 1.0,
        "solution_inputs": 0.301,  # summed unrounded, rounded once
        "solution_cases": 0.6,
        "solution_outputs": 0.151,
        "solution_close": 0.5,
        "candidate": 2.802,
    }
    steps = sum(v for k, v in rec.phase_s.items() if k.startswith("solution_"))
    assert steps == pytest.approx(rec.phase_s["candidate"], abs=0.0005 * 6)


def test_laps_add_to_what_the_record_already_holds(clock):
    rec = Record(phase_s={"reference": 2.0, "candidate": 1.0, "solution_cases": 1.0})
    laps = phases.Laps(rec, "candidate", "solution_cases")
    clock.now += 0.5
    laps.stop()
    assert rec.phase_s == {"reference": 2.0, "candidate": 1.5, "solution_cases": 1.5}


def test_phase_adds_a_blocks_seconds_even_when_it_raises(clock):
    rec = Record()
    with pytest.raises(RuntimeError), phases.phase(rec, "reference"):
        clock.now += 1.5
        raise RuntimeError("the reference failed")
    assert rec.phase_s == {"reference": 1.5}


def test_steps_measured_elsewhere_and_the_rest_add_up_to_their_phase():
    rec = Record(phase_s={"baseline": 14.0})
    phases.split(rec, "baseline", {"start": 0.75, "import": 2.75, "eager": 8.0})
    assert rec.phase_s == {
        "baseline": 14.0,
        "baseline_start": 0.75,
        "baseline_import": 2.75,
        "baseline_eager": 8.0,
        "baseline_rest": 2.5,
    }
    cached = Record(phase_s={"baseline": 0.01})
    phases.split(cached, "baseline", None)  # a cached baseline: nothing to split
    assert cached.phase_s == {"baseline": 0.01}


def test_a_phase_entered_again_adds_up_and_moves_to_where_it_last_ended(clock):
    """The baseline's child is launched before the reference phase and waited for after it."""
    rec = Record()
    with phases.phase(rec, "baseline"):
        clock.now += 0.25
    with phases.phase(rec, "reference"):
        clock.now += 2.0
    with phases.phase(rec, "baseline"):
        clock.now += 1.5
    assert list(rec.phase_s.items()) == [("reference", 2.0), ("baseline", 1.75)]


def test_steps_that_ran_beside_other_phases_are_background_not_phase_seconds():
    rec = Record(phase_s={"baseline": 2.0})
    phases.split(rec, "baseline", {"compile": 0.0, "eager": 1.5})
    phases.beside(rec, "baseline", {"start": 3.0, "compile": 6.0, "eager": 0.0})
    assert rec.phase_s == {"baseline": 2.0, "baseline_compile": 0.0, "baseline_eager": 1.5, "baseline_rest": 0.5}
    assert rec.wall_background_s == {"baseline_start": 3.0, "baseline_compile": 6.0}
    phases.beside(rec, "baseline", None)  # a cached baseline: nothing beside
    assert rec.wall_background_s == {"baseline_start": 3.0, "baseline_compile": 6.0}
