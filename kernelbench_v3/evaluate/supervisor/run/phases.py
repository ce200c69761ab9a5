"""Where an evaluation's seconds go, into `Record.phase_s`.

`phase` adds a block's wall time to one name (the top-level phases: setup, reference, baseline,
candidate, verdict, cleanup). `Laps` splits one phase into contiguous steps: from `start` to
`stop` every moment belongs to exactly one step (the one most recently switched to), so the
steps add up to the phase by construction, and no second can fall between two named blocks.
`split` names the steps of a phase measured elsewhere (the baseline child's own clock), with
the phase's remainder as `<phase>_rest`, so they add up to it too. `beside` files the seconds of
such steps that ran while the evaluation did something else (a baseline child started ahead of
the reference phase) under `Record.wall_background_s`, in no phase: counted once, never twice.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from ...record import Record


@contextmanager
def phase(rec: Record, name: str) -> Iterator[None]:
    """Add the block's seconds to `name`. A phase entered again (the baseline: its child's launch
    before the reference, the wait for it after) moves to where it last ended, so `phase_s` keeps
    the order the phases ended in."""
    started = time.monotonic()
    try:
        yield
    finally:
        rec.phase_s[name] = round(rec.phase_s.pop(name, 0.0) + time.monotonic() - started, 3)


class Laps:
    """A lap timer over the steps of the phase `total`: `to(step)` ends the current step and
    starts `step`; `stop()` ends the last one and writes every step, and `total` as their sum,
    into `rec.phase_s`. Seconds are summed unrounded and rounded once, at `stop`."""

    def __init__(self, rec: Record, total: str, first: str):
        self.rec, self.total = rec, total
        self.seconds: dict[str, float] = {}
        self.current: str | None = first
        self.mark = time.monotonic()

    def to(self, step: str) -> None:
        now = time.monotonic()
        if self.current is not None:
            self.seconds[self.current] = self.seconds.get(self.current, 0.0) + now - self.mark
        self.current, self.mark = step, now

    def stop(self) -> None:
        if self.current is None:
            return
        self.to(self.current)
        self.current = None
        for step, seconds in self.seconds.items():
            self.rec.phase_s[step] = round(self.rec.phase_s.get(step, 0.0) + seconds, 3)
        self.rec.phase_s[self.total] = round(self.rec.phase_s.get(self.total, 0.0) + sum(self.seconds.values()), 3)
        self.seconds = {}


def split(rec: Record, total: str, steps: dict[str, float] | None) -> None:
    """Write `steps` (seconds measured inside `total`, by another clock) into `rec.phase_s` as
    `<total>_<step>`, and `<total>_rest` as what of `total` they leave (never below 0)."""
    if not steps or total not in rec.phase_s:
        return
    for step, seconds in steps.items():
        rec.phase_s[f"{total}_{step}"] = round(float(seconds), 3)
    rec.phase_s[f"{total}_rest"] = round(max(0.0, rec.phase_s[total] - sum(steps.values())), 3)


def beside(rec: Record, total: str, steps: dict[str, float] | None) -> None:
    """Write `steps` (seconds of `total`'s work that ran beside the evaluation's other phases, so
    in none of them) into `rec.wall_background_s` as `<total>_<step>`; steps of no seconds are left out."""
    for step, seconds in (steps or {}).items():
        if seconds > 0:
            name = f"{total}_{step}"
            rec.wall_background_s[name] = round(rec.wall_background_s.get(name, 0.0) + float(seconds), 3)
