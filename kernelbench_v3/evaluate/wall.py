"""Where a `kbv3 eval` process's seconds go, from the process's start to its record.

`duration_s` and `phase_s` cover one evaluation, from `run_evaluation`'s start to its end. The
process that runs it spends seconds before and after: the interpreter and the CLI's imports, the
argument checks, the MPS daemon's start and its client probe, the supervisor's import of torch,
the device probe, closing the warm zygote. `Wall` is a lap timer from the process's start
(`process_started`, read from /proc) in which every moment belongs to exactly one step, and
`Wall.finish` writes the whole, ordered breakdown into the record:

- `wall_s`: seconds from the process's start to the record;
- `wall_phase_s`: the CLI's steps before the evaluation, then the evaluation's own top-level
  phases with `reference` and `candidate` replaced by their `reference_*` and `solution_*` steps
  (so the reference's input draws, the solution's spawn, its wait for the zygote and its timing
  are each a part) and `evaluate_call` (what the call took
  beyond them: the call around `run_evaluation`, or a service's queue and frames), then the
  CLI's steps after it, then `unattributed`: `wall_s` less every named part (their rounding),
  so the parts add up to `wall_s` exactly;
- `wall_background_s`: work that ran beside the named parts and is in none of them (the zygote's
  start, the MPS daemon's start and probe, and the evaluation's own: a baseline child's steps
  that ran beside the reference phase, `baseline_*`), for seeing whether an overlap worked.

Time after the record (printing it, the interpreter's exit) cannot be in the record it prints;
`benchmarks/bench/bench_throughput_gpu.py` names it `process_exit` (its wall clock less `wall_s`).
The clock is injected, so the accounting is tested without measuring anything.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from .record import PHASE_STEPS, Record, is_phase_step

Clock = Callable[[], float]

EVALUATION = "evaluation"  # the lap that holds `evaluate`, replaced by the record's own phases
# The `evaluation` lap less the record's own phases: for an evaluation in this process the call
# around `run_evaluation`, through `kbv3 serve` the service's queue and the frames both ways.
CALL = "evaluate_call"
REMAINDER = "unattributed"


def process_started(clock: Clock = time.monotonic) -> float:
    """This process's start on `clock`'s scale: /proc gives it in clock ticks since boot, which
    CLOCK_BOOTTIME counts too, so the interpreter's start and the imports before any code of
    ours ran are counted. Where /proc is not readable (not Linux): now."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        started_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime
        since_start = time.clock_gettime(time.CLOCK_BOOTTIME) - started_boot
    except (OSError, ValueError, IndexError, AttributeError):
        return clock()
    return clock() - max(0.0, since_start)


class Wall:
    """A lap timer over a whole process: `to(step)` ends the current step and starts `step`;
    `finish(record)` ends the last one and writes the breakdown (module docstring)."""

    def __init__(self, first: str = "cli_import", *, clock: Clock = time.monotonic, started: float | None = None):
        self.clock = clock
        self.started = clock() if started is None else started
        self.current, self.mark = first, self.started
        self.seconds: dict[str, float] = {}
        self.background: dict[str, float] = {}

    def to(self, step: str) -> None:
        now = self.clock()
        self.seconds[self.current] = self.seconds.get(self.current, 0.0) + max(0.0, now - self.mark)
        self.current, self.mark = step, now

    def split(self, at: float | None, step: str) -> None:
        """The current step ended at `at` (a moment another thread noted, on this clock) and
        `step` has run since; `at` is held between the current step's start and now."""
        now = self.clock()
        at = now if at is None else min(max(at, self.mark), now)
        self.seconds[self.current] = self.seconds.get(self.current, 0.0) + (at - self.mark)
        self.current, self.mark = step, at
        self.to(step)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """The block is `name`; afterwards the step that ran before it goes on."""
        before = self.current
        self.to(name)
        try:
            yield
        finally:
            self.to(before)

    def beside(self, name: str, seconds: float | None) -> None:
        """Work of `seconds` that ran beside the named steps (`wall_background_s`)."""
        if seconds is not None and seconds >= 0:
            self.background[name] = round(self.background.get(name, 0.0) + seconds, 3)

    def finish(self, record: Record) -> Record:
        self.to(self.current)
        record.wall_s = round(self.clock() - self.started, 3)
        record.wall_phase_s = breakdown(self.seconds, record.phase_s, record.wall_s)
        record.wall_background_s = {**record.wall_background_s, **self.background}  # the evaluation's own too
        return record


def evaluation_parts(phase_s: Mapping[str, float]) -> dict[str, float]:
    """The evaluation's phases as parts of the wall: the top-level ones in their order, with
    a split phase (`reference`, `candidate`: `record.PHASE_STEPS`) replaced by its steps (which
    add up to it)."""
    steps = {total: {k: v for k, v in phase_s.items() if k.startswith(prefix)} for total, prefix in PHASE_STEPS.items()}
    parts: dict[str, float] = {}
    for name, seconds in phase_s.items():
        if steps.get(name):
            parts.update(steps[name])
        elif not is_phase_step(name):
            parts[name] = seconds
    for total, its_steps in steps.items():
        if its_steps and total not in phase_s:  # steps without their total: still parts
            parts.update(its_steps)
    return parts


def breakdown(laps: Mapping[str, float], phase_s: Mapping[str, float], wall_s: float) -> dict[str, float]:
    """The ordered parts of `wall_s`: the laps, with the `evaluation` lap replaced by the
    record's phases, and `unattributed` making the sum exact."""
    parts: dict[str, float] = {}
    for name, seconds in laps.items():
        if name == EVALUATION:
            inside = evaluation_parts(phase_s)
            for phase, s in inside.items():
                parts[phase] = round(parts.get(phase, 0.0) + s, 3)
            parts[CALL] = round(seconds - sum(inside.values()), 3)
        else:
            parts[name] = round(parts.get(name, 0.0) + seconds, 3)
    parts[REMAINDER] = round(wall_s - sum(parts.values()), 3)
    return parts


__all__ = ["CALL", "EVALUATION", "REMAINDER", "Wall", "breakdown", "evaluation_parts", "process_started"]
