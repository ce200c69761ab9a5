"""The doorbell: one timed call at a time, opened through a few words of shared memory.

A timed call must not pay for a socket round trip, a JSON frame or a wake-up from a blocking
system call: those cost tens of microseconds and swing by as much, more than a small kernel takes.
So once a process has been told to serve calls (`messages.Calls`), each call is armed and
answered through five 64-bit words at the start of its arena, both sides polling:

    WAKE   the timer has named call `seq`'s set and resumed the process (it wrote seq)
    SET    which input set call `seq` reads; STOP_SET ends the loop
    ARMED  the process is ready for call `seq` (it wrote seq): gated, its GPU work is enqueued
           behind the gate (`gate`); rung, it polls GO
    GO     rung calls only: the timer opens call `seq` (it wrote seq)
    DONE   rung calls only: the process has finished call `seq` (it wrote seq)

The gate's own two words (`gate.GateWords`) follow in the same block of BLOCK_BYTES. The words are
plain data: whatever the process writes into them can only delay its own call or end the
session, never move the timer's clock, which reads its own `perf_counter` around the window. The
echo (the trusted process whose calls measure the protocol's own cost) has an arena of its own,
so the solution cannot touch its words.

Waiting spins for `spin_s` (no system call on the timed path), then polls with short sleeps, so
that on an oversubscribed CPU host two spinning processes do not starve each other; every wait
ends at a deadline on the waiter's own clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from .gate import GATE_BYTES

ARMED, GO, SET, DONE, WAKE = 0, 1, 2, 3, 4
WORDS = 5
STOP_SET = -1
NBYTES = GATE_BYTES  # the words, then the gate's
SPIN_S = 0.005  # poll without sleeping for this long, then sleep between polls
SLEEP_S = 0.0002
ALIVE_EVERY_S = 0.1  # how often a long wait asks whether the other side is still there


class DoorbellTimeout(Exception):
    """The other side did not answer before the deadline."""


class Doorbell:
    """Five int64 words at the start of a uint8 tensor both processes map (a view of the arena),
    and the gate's words after them (`gate_words`)."""

    def __init__(self, memory: torch.Tensor):
        if memory.dtype != torch.uint8 or memory.numel() < NBYTES:
            raise ValueError(f"a doorbell needs {NBYTES} bytes of a uint8 tensor")
        # A memoryview over the mapping: reading a word costs a few hundred nanoseconds.
        self.block = memoryview(memory[:NBYTES].numpy()).cast("B")
        self.address = memory.data_ptr()  # the block's host address in this process (to map the gate)
        self.words = self.block[: WORDS * 8].cast("q")

    def gate_words(self):
        from .gate import GateWords

        return GateWords(self.block)

    def reset(self) -> None:
        for i in range(WORDS):
            self.words[i] = 0
        self.block[WORDS * 8 :] = bytes(NBYTES - WORDS * 8)

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
