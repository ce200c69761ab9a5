"""`measure`: time a caller's calls one per window against the trusted echo's, by the timer's
clock. Both entries of the timing room, `time_solution` and `time_reference`, call it through
one setup (`rig.Rig`), so a solution and its baseline are timed by one method under one stopping
rule. A caller is anything with `arm` and `ring` (`Caller`): a solution's or the echo's process
(`timed_process.TimedProcess`) or a call in the timer's own process (`local`).

Each call, in order (every step on the timer's side; the caller's side only ever arms):

1. draw new inputs (the problem's own `get_inputs()` under a seed the caller never learns);
2. the echo's call, exactly as the caller's below: arm it, write the same bytes into the timer's
   own decoy memory, flush, ring, then time a flush right after its window;
3. the caller's call: arm it (a gated caller enqueues its GPU work behind the gate; its whole
   side is stopped from ARMED on), write the inputs into the set it armed, clear the L2 with the
   timer's own kernel (leaving one output's dirty lines), ring, then time a flush right after;
4. hand the call to `judge`: it copies the output as it stood at DONE (`snapshot`: under MPS
   the copy is queued before the window, behind DONE itself; the echo's turn copies as many
   bytes, so the flushes after both windows stay alike), and after the call it decides at
   random whether to judge that copy exactly as a correctness case: work still writing the
   output after DONE leaves the copy wrong.

Under the occupancy gate (`held`, `protocol.hold`) steps 2 and 3 go through the timer's HOLD:
the new inputs go into the timer's stage first; then for each side HOLD takes every SM, the
side arms, HOLD itself writes the inputs where that side reads them and clears the L2, and the
ring is HOLD's GO (`held.HeldTurns.turn`). A resident kernel that keeps HOLD from taking every
SM ends timing as a busy GPU.

A call's net time is its window less the echo's window before it: what is left is the caller's
GPU work as one graph over rotating input sets would time it (the echo's own tiny call stands
for the fixed cost of a launch that such a graph hides; the null-call ladder on the H200 put
this within 0.2-1.1 us of kernels of 2-20 us, where adding back the echo call's duration by
events read 3.5-28 us too much, docs/timing.md). The inputs exist
only from step 3's write on, while the caller is stopped and watched: the write and the flush
are timed for both the echo and the caller (`prep`), so a kernel of the caller's left running
beside them shows as a slower prep (`witness`). Timing ends by `stats.should_stop`, never before
the calls judging needs (`Judge.calls_needed`), or at once when the GPU is found busy while it
should be idle (`witness.busy`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from ...protocol.hold import HoldRefused
from . import witness
from .device_work import DeviceWork
from .stats import CallPlan, should_stop

WARM_CALLS = 3  # per side, before any call is scored (first replays, page faults)
BUSY_EVERY = 16  # scored calls between looks at whether the GPU is busy
# A call's steps as `CallTimes.steps` times them: new inputs; the echo's turn (arming, stopping
# its side, the write and the flush), window and flush after; the same for the caller; judging.
LOOP_STEPS = ("draw", "echo_turn", "echo_window", "echo_after", "turn", "window", "after", "judge")


class Caller(Protocol):
    def arm(self, set_index: int) -> float: ...

    def ring(self) -> float: ...


class Judge(Protocol):
    def before_window(self, caller: Caller, set_index: int, echo: bool) -> None: ...

    def after_window(self, set_index: int, echo: bool) -> None: ...

    def after_call(self, set_index: int, inputs: list[Any], index: int, warm: bool) -> None: ...

    def calls_needed(self) -> int: ...


@dataclass(frozen=True)
class Feed:
    """Where a call's inputs come from and go to."""

    sets: int
    draw: Callable[[], list[Any]]  # new inputs (the timer's own memory)
    write: Callable[[int, list[Any]], None]  # into the set the caller reads
    decoy: Callable[[list[Any]], None]  # the same bytes into memory only the timer reads


@dataclass
class CallTimes:
    """Per scored call, seconds of the timer's clock."""

    nets: list[float] = field(default_factory=list)
    windows: list[float] = field(default_factory=list)
    echo_windows: list[float] = field(default_factory=list)
    arms: list[float] = field(default_factory=list)
    echo_arms: list[float] = field(default_factory=list)
    preps: list[float] = field(default_factory=list)  # input write + flush before the caller's window
    echo_preps: list[float] = field(default_factory=list)
    after: list[float] = field(default_factory=list)  # a flush right after the caller's window
    after_echo: list[float] = field(default_factory=list)
    after_gpu: list[float] = field(default_factory=list)  # the same flushes by events (a record)
    after_echo_gpu: list[float] = field(default_factory=list)
    # Seconds of each step of the loop per scored call (LOOP_STEPS, a record of where the
    # loop's time goes; nothing is judged on it).
    steps: dict[str, list[float]] = field(default_factory=lambda: {step: [] for step in LOOP_STEPS})
    elapsed_s: float = 0.0
    busy: str = ""  # why timing stopped early: the GPU was busy when it should have been idle


def _prepare(write: Callable[[], None], work: DeviceWork, clock: Callable[[], float]) -> float:
    started = clock()
    write()
    work.flush()
    work.sync()
    return clock() - started


def _turn(side: Caller, set_index: int, write: Callable[[], None], work: DeviceWork, held: Any, clock: Any, echo: bool):
    """One side's call armed and its inputs written: (seconds to arm, seconds of the write and
    flush). Through HOLD when `held` (it takes every SM first and writes the inputs itself);
    else the side arms, then the timer writes and flushes."""
    if held is not None:
        return held.turn(side, set_index, echo=echo)
    arm = side.arm(set_index)
    return arm, _prepare(write, work, clock)


def measure(
    caller: Caller,
    echo: Caller,
    feed: Feed,
    work: DeviceWork,
    plan: CallPlan,
    rng: Any,
    judge: Judge | None = None,
    subtract_echo: bool = True,
    clock: Callable[[], float] = time.perf_counter,
    held: Any = None,
) -> CallTimes:
    """Time `caller` one call per window (module docstring; `held`: the occupancy gate's
    `held.HeldTurns`). Raises what the callers raise."""
    calls = CallTimes()
    started = clock()
    index = 0
    try:
        while True:
            warm = index < WARM_CALLS
            at_least = judge.calls_needed() if judge is not None else 0
            if not warm and should_stop(calls.nets, clock() - started, plan, at_least):
                break
            if index == WARM_CALLS:
                started = clock()
            marks = [clock()]
            s = rng.randrange(feed.sets)
            inputs = feed.draw()
            if held is not None:  # the stage: HOLD copies it to where each side's call reads
                feed.decoy(inputs)
                work.sync()
            marks.append(clock())
            echo_arm, echo_prep = _turn(echo, 0, partial(feed.decoy, inputs), work, held, clock, echo=True)
            if judge is not None:
                judge.before_window(echo, 0, echo=True)
            marks.append(clock())
            echo_window = echo.ring()
            if judge is not None:
                judge.after_window(0, echo=True)
            marks.append(clock())
            after_echo = work.timed_flush(clock)
            after_echo_gpu = work.flush_gpu_s
            marks.append(clock())
            arm, prep = _turn(caller, s, partial(feed.write, s, inputs), work, held, clock, echo=False)
            if judge is not None:  # under MPS the copy at DONE is queued now, behind DONE itself
                judge.before_window(caller, s, echo=False)
            marks.append(clock())
            window = caller.ring()
            if judge is not None:  # the output as it stands the moment the window closed
                judge.after_window(s, echo=False)
            marks.append(clock())
            after = work.timed_flush(clock)
            marks.append(clock())
            if not warm:
                # On the CPU the figure only tests the machinery: a call of a few microseconds is
                # below the echo's noise there, so the window is kept whole (never negative).
                net = window - echo_window if subtract_echo else window
                _append(calls, net, window, echo_window, arm, echo_arm, prep, echo_prep, after, after_echo)
                if work.flush_gpu_s is not None and after_echo_gpu is not None:
                    calls.after_gpu.append(work.flush_gpu_s)
                    calls.after_echo_gpu.append(after_echo_gpu)
            if judge is not None:  # judged or not is decided now, after the call answered
                judge.after_call(s, inputs, len(calls.nets), warm)
            if not warm:
                marks.append(clock())
                for step, begun, ended in zip(LOOP_STEPS, marks, marks[1:]):
                    calls.steps[step].append(ended - begun)
            index += 1
            if not warm and len(calls.nets) % BUSY_EVERY == 0:
                calls.busy = witness.busy(calls.after_echo, work)
                if calls.busy:
                    break
    except HoldRefused as exc:  # a kernel of another process's kept HOLD from taking every SM
        calls.busy = str(exc)
    finally:
        if held is not None:
            held.release()  # HOLD never outlives the timing, whatever ended it
    calls.elapsed_s = clock() - started
    return calls


def _append(calls: CallTimes, *values: float) -> None:
    lists: Sequence[list[float]] = (
        calls.nets,
        calls.windows,
        calls.echo_windows,
        calls.arms,
        calls.echo_arms,
        calls.preps,
        calls.echo_preps,
        calls.after,
        calls.after_echo,
    )
    for target, value in zip(lists, values):
        target.append(value)
