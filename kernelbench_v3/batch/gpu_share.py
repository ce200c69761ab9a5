"""How a local batch's workers share one GPU: the batch's parent lends each GPU's turns.

With two workers on a GPU, one evaluation's reference phase runs while the other's solution
process runs its cases; a solution process and every timed second still have the GPU to
themselves (`evaluate.GpuTurns` says which turn each step takes). The locks behind those turns
live here, in the parent's memory:

- `TurnTable`: one GPU's locks (`SOLUTION_LOCK`, `GPU_LOCK`), each held shared or exclusive,
  granted in the order they were asked for (a request waits behind an earlier one for the same
  lock, so an exclusive turn is never starved by shared ones). A worker that dies or is killed
  gives back all it held (`forget`).
- `PipeLender`: a worker's side (the `Lender` of `GpuTurns`): it asks over its own pipe to the
  parent and blocks until the parent answers `GRANTED`.

Only the parent and its workers hold those pipes; a solution process is forked from a zygote
that was exec'd with no inherited descriptor, so no solution's code can take, hold or free a turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TURN = "turn"  # a worker's message: (TURN, "take", lock, shared) or (TURN, "give", lock)
GRANTED = "granted"  # the parent's answer to a take
TURN_ENV = "KBV3_BATCH_SHARED_GPU"  # set in a worker that shares its GPU with another worker


class PipeLender:
    """A worker's turns, asked of the batch's parent over the worker's pipe `conn`."""

    def __init__(self, conn: Any):
        self.conn = conn

    def take(self, lock: str, shared: bool) -> None:
        self.conn.send((TURN, "take", lock, shared))
        answer = self.conn.recv()
        if answer != GRANTED:
            raise RuntimeError(f"the batch refused the GPU's {lock} turn: {answer!r}")

    def give(self, lock: str) -> None:
        self.conn.send((TURN, "give", lock))


def is_turn_message(message: Any) -> bool:
    return isinstance(message, tuple) and len(message) >= 3 and message[0] == TURN


class TurnTable:
    """The locks of one GPU, lent to the workers that share it (module docstring). `notify(worker)`
    is called for each request granted, in grant order; a request granted at once is notified too."""

    def __init__(self, notify: Callable[[str], None]):
        self.notify = notify
        self.holders: dict[str, dict[str, bool]] = {}  # lock -> worker -> shared
        self.waiting: list[tuple[str, str, bool]] = []  # (worker, lock, shared), in request order

    def handle(self, worker: str, message: tuple) -> None:
        """A worker's TURN message."""
        if message[1] == "take":
            self.take(worker, str(message[2]), bool(message[3]))
        elif message[1] == "give":
            self.give(worker, str(message[2]))
        else:
            raise ValueError(f"worker {worker} sent an unknown turn message {message!r}")

    def take(self, worker: str, lock: str, shared: bool) -> None:
        if worker in self.holders.get(lock, {}) or any(w == worker and k == lock for w, k, _ in self.waiting):
            raise ValueError(f"worker {worker} asked again for the {lock} lock it holds or waits for")
        self.waiting.append((worker, lock, shared))
        self._grant()

    def give(self, worker: str, lock: str) -> None:
        self.holders.get(lock, {}).pop(worker, None)
        self._grant()

    def forget(self, worker: str) -> None:
        """A worker is gone: what it held is free, what it asked for is dropped."""
        for held in self.holders.values():
            held.pop(worker, None)
        self.waiting = [w for w in self.waiting if w[0] != worker]
        self._grant()

    def waits(self, worker: str) -> bool:
        """Whether `worker` is blocked on a turn (its silence is the other's work, not a hang)."""
        return any(w == worker for w, _, _ in self.waiting)

    def _grant(self) -> None:
        queued: set[str] = set()  # locks with an earlier request still waiting: no one passes it
        still: list[tuple[str, str, bool]] = []
        granted: list[str] = []
        for worker, lock, shared in self.waiting:
            held = self.holders.setdefault(lock, {})
            free = all(held.values()) if shared else not held
            if lock not in queued and free:
                held[worker] = shared
                granted.append(worker)
            else:
                queued.add(lock)
                still.append((worker, lock, shared))
        self.waiting = still
        for worker in granted:
            self.notify(worker)


__all__ = ["GRANTED", "TURN", "TURN_ENV", "PipeLender", "TurnTable", "is_turn_message"]
