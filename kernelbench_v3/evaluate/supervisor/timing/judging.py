"""Which timed calls are judged, and on what copy of their output (`Judging`).

Judging runs to the end: every timed call, first to last, has the same chance of being judged,
fixed once the warm calls have measured what judging costs and never changed after, so nothing
the solution sees of past calls tells it anything of the next one. A judged call gets exactly a
correctness case's rules (the verdict's `Verifier`, handed in: tolerance, dtype, finiteness and
the float64 precision rule), decided only after the call answered, on the copy of the output
taken at DONE (`snapshot.Snapshots`). `Outputs` is where each input set's call leaves its output.

A forgery can move the score only by being more than half of the scored calls, and every forged
call is wrong as it stood at DONE. So timing runs at least `calls_needed` calls: enough that such
a forgery goes unjudged at most FORGERY_ESCAPE of the time, whatever the chance a judgement costs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Protocol

import torch

from ..session import SessionLost
from .memory import TimedMemory
from .snapshot import Snapshots

JUDGE_BUDGET = 1.0  # judging may cost this share of the timing loop's own time ...
MIN_JUDGE_SHARE = 0.05  # ... but every call is judged with at least this chance
FORGERY_ESCAPE = 1e-3  # a forgery of half the scored calls goes unjudged at most this often


class OutputCheck(Protocol):
    """How one judged call's output is held to a case's rules (the verdict's `Verifier` is one)."""

    def check(self, label: str, inputs: list[Any], output: torch.Tensor, float64: bool) -> str:
        """'' when the output passes every rule a case gets, else why not."""
        ...


class Outputs:
    """Where the solution's call on each input set leaves its output, as tensors the supervisor
    can read: the graphs' outputs mapped through CUDA IPC, or the sets' slots."""

    def __init__(self, memory: TimedMemory, shared: list[dict[str, Any]]):
        self.memory, self.mapped = memory, []
        if shared:
            from ...protocol.cuda_ipc import open_exported

            if len(shared) != memory.count:
                raise SessionLost(f"the solution process described {len(shared)} outputs for {memory.count} sets")
            try:
                self.mapped = [open_exported(d, memory.out_shape, memory.out_dtype) for d in shared]
            except (ValueError, RuntimeError) as exc:
                raise SessionLost(f"the solution process's output locations cannot be read: {exc}") from None

    def of(self, s: int) -> torch.Tensor:
        return self.mapped[s] if self.mapped else self.memory.slots[s]


class Judging:
    """Decides, after each call answered, whether to judge it, and judges it (an `OutputCheck`).

    The warm calls are always judged, which measures what one judgement costs; from then on every
    call is judged with one fixed chance, JUDGE_BUDGET of the loop's own seconds per call over a
    judgement's seconds, at least MIN_JUDGE_SHARE: bounded by cost, never by a count, so the
    2,000th call is as likely to be judged as the 10th."""

    def __init__(
        self,
        verifier: OutputCheck,
        outputs: Outputs,
        rng: Any,
        clock: Callable[[], float] = time.perf_counter,
        echo_output: torch.Tensor | None = None,
        snapshots: Snapshots | None = None,
    ):
        self.verifier, self.outputs, self.rng, self.clock = verifier, outputs, rng, clock
        self.echo_output = echo_output  # as many bytes as an output, in memory only the timer reaches
        self.snapshots = snapshots or Snapshots(on_device=False)
        self.share: float | None = None
        self.verified = 0
        self.failures: list[str] = []
        self.judge_s: list[float] = []
        self.loop_s: list[float] = []
        self._last = clock()

    def _source(self, set_index: int, echo: bool) -> torch.Tensor | None:
        return self.echo_output if echo else self.outputs.of(set_index)

    def before_window(self, caller: Any, set_index: int, echo: bool) -> None:
        """Under MPS: the copy at DONE, queued behind DONE on the timer's stream (`Snapshots`)."""
        if getattr(caller, "gated", False):
            self.snapshots.before_window(caller.gate, caller.seq, self._source(set_index, echo), echo)

    def after_window(self, set_index: int, echo: bool) -> None:
        """Without MPS: copy the output as it stands the moment the window closed (queued at
        once): the copy judged calls are judged on. The echo's turn copies as many bytes."""
        self.snapshots.after_window(self._source(set_index, echo), echo)

    def after_call(self, set_index: int, inputs: list[Any], index: int, warm: bool) -> None:
        now = self.clock()
        self.loop_s.append(now - self._last)
        if warm or self.share is None and not self.judge_s:
            self._judge(set_index, inputs, index)
        else:
            if self.share is None:
                per_judgement = sorted(self.judge_s)[len(self.judge_s) // 2]
                per_call = sorted(self.loop_s)[len(self.loop_s) // 2]
                self.share = max(MIN_JUDGE_SHARE, min(1.0, JUDGE_BUDGET * per_call / max(per_judgement, 1e-9)))
            if self.rng.random() < self.share:
                self._judge(set_index, inputs, index)
        self._last = self.clock()

    def calls_needed(self) -> int:
        """Scored calls that judge a forgery of half of them but FORGERY_ESCAPE of the time:
        n with (1 - share)^(n/2) <= FORGERY_ESCAPE; 0 until the share is fixed, and for a
        share of 1 (every call judged)."""
        share = self.share
        if share is None or share >= 1.0:
            return 0
        return math.ceil(2 * math.log(FORGERY_ESCAPE) / math.log(1.0 - share))

    def _judge(self, set_index: int, inputs: list[Any], index: int) -> None:
        started = self.clock()
        output = self.snapshots.output()
        output = self.outputs.of(set_index) if output is None else output
        why = self.verifier.check(f"timed call {index}", inputs, output, True)
        self.verified += 1
        if why:
            self.failures.append(why)
        self.judge_s.append(self.clock() - started)
