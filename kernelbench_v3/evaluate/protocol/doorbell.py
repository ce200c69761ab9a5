"""The doorbell: one timed call at a time, rung through a few words of shared memory.

A timed call must not pay for a socket round trip, a JSON frame or a wake-up from a blocking
system call: those cost tens of microseconds and swing by as much, more than a small kernel takes.
So once a solution process has been told to serve calls (`messages.Calls`), each call is opened
and answered through five 64-bit words at the start of its arena, both sides polling:

    WAKE   the supervisor has written call `seq`'s inputs and resumed the process (it wrote seq);
           the process makes its GPU context the active one (a tiny kernel, synchronised: on a
           time-sliced GPU the switch from the supervisor's context costs ~0.2 ms, which must
           not fall inside the window), then arms
    ARMED  the solution process is ready for call `seq` and polls GO (it wrote seq)
    GO     the supervisor opens call `seq` (it wrote seq), on input set SET; -seq ends the loop
    SET    which input set call `seq` reads
    DONE   the solution process has finished call `seq` (it wrote seq)

The words are plain data: whatever the solution process writes into them can only delay its own
call or end the session, never move the supervisor's clock, which reads its own `perf_counter`
before writing GO and after seeing DONE. The echo (the trusted process whose calls measure the
doorbell's own cost) has an arena of its own, so the solution cannot touch its words.

Waiting spins for `spin_s` (no system call on the timed path), then polls with short sleeps, so
that on an oversubscribed CPU host two spinning processes do not starve each other; every wait
ends at a deadline on the waiter's own clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

ARMED, GO, SET, DONE, WAKE = 0, 1, 2, 3, 4
WORDS = 5
NBYTES = WORDS * 8
SPIN_S = 0.005  # poll without sleeping for this long, then sleep between polls
SLEEP_S = 0.0002
ALIVE_EVERY_S = 0.1  # how often a long wait asks whether the other side is still there


class DoorbellTimeout(Exception):
    """The other side did not answer before the deadline."""


class Doorbell:
    """Five int64 words at the start of a uint8 tensor both processes map (a view of the arena)."""

    def __init__(self, memory: torch.Tensor):
        if memory.dtype != torch.uint8 or memory.numel() < NBYTES:
            raise ValueError(f"a doorbell needs {NBYTES} bytes of a uint8 tensor")
        # A memoryview over the mapping: reading a word costs a few hundred nanoseconds.
        self.words = memoryview(memory[:NBYTES].numpy()).cast("B").cast("q")

    def reset(self) -> None:
        for i in range(WORDS):
            self.words[i] = 0

    def read(self, word: int) -> int:
        return int(self.words[word])

    def write(self, word: int, value: int) -> None:
        self.words[word] = value

    def wait(self, word: int, value: int, timeout_s: float, **how: Any) -> None:
        """Return once `word` holds `value` (see `wait_any`)."""
        self.wait_any(word, (value,), timeout_s, **how)

    def wait_any(
        self,
        word: int,
        values: tuple[int, ...],
        timeout_s: float,
        spin_s: float = SPIN_S,
        sleep_s: float = SLEEP_S,
        clock: Callable[[], float] = time.perf_counter,
        alive: Callable[[], bool] | None = None,
    ) -> int:
        """Return the value once `word` holds one of `values`: polling without sleeping for
        `spin_s`, then sleeping `sleep_s` between polls. DoorbellTimeout after `timeout_s` by
        `clock`, or as soon as `alive()` (asked every ALIVE_EVERY_S) says the other side is gone."""
        words = self.words
        got = words[word]
        if got in values:
            return got
        started = clock()
        spin_until, deadline, next_alive = started + spin_s, started + timeout_s, started + ALIVE_EVERY_S
        while True:
            got = words[word]
            if got in values:
                return got
            now = clock()
            if now > deadline:
                raise DoorbellTimeout(f"word {word} did not reach {values} within {timeout_s:.3g} s")
            if now > next_alive:
                next_alive = now + ALIVE_EVERY_S
                if alive is not None and not alive():
                    raise DoorbellTimeout(f"the other side went away while word {word} waited for {values}")
            if now > spin_until:
                time.sleep(sleep_s)

    def serve_wait(
        self,
        seq: int,
        timeout_s: float,
        prepare: Callable[[], None] | None = None,
        spin_s: float = SPIN_S,
        sleep_s: float = SLEEP_S,
    ) -> int:
        """The serving side's wait for call `seq`: wait for WAKE = seq, `prepare()`, write ARMED =
        seq, wait for GO = seq or -seq; returns GO."""
        self.wait(WAKE, seq, timeout_s, spin_s=spin_s, sleep_s=sleep_s)
        if prepare is not None:
            prepare()
        self.words[ARMED] = seq
        return self.wait_any(GO, (seq, -seq), timeout_s, spin_s=spin_s, sleep_s=sleep_s)
