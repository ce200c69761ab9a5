"""The supervisor's conversation with one solution process: requests out, checked replies in.

A `Session` owns the solution process's channel and arena: it writes inputs and state into
the arena, sends typed requests, waits for each reply under a deadline of the supervisor's own
clock, parses the reply (`messages.parse_reply`) and copies any output out of the arena at once.
Between timed windows the supervisor may `pause` the solution's side (`pause.ProcessPause`: this
process, the others forked from the same zygote, and everything they started); the next request
resumes this process first, so a paused process can never miss a request. While paused, nothing
the solution started on the host runs: it cannot compute on the inputs the supervisor is writing
for the next window. A pause that does not hold (a process that did not stop, is traced, or ran
while stopped) ends the session, so the verdict fails `process`.
Whatever goes wrong on the other side - a crash, a hang, a malformed or unexpected message - ends
the session with `SessionLost`; the caller turns that into a verdict. It never raises for what
the solution does otherwise.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ...protocol.channel import Arena, Deadline, Layout, Link, PeerGone, ProtocolError, TensorRef, tensor_nbytes
from ...protocol.messages import OutputInfo, Reply, Slot, parse_reply, to_json
from .pause import NotStopped, ProcessPause, TooManyProcesses

WATCH_INTERVAL_S = 1.0
STOP_CHECK = "stopped means stopped"  # how a lost stop reads in the `process` check


class SessionLost(Exception):
    """The solution process can no longer be talked to; `reason` says why."""

    def __init__(self, reason: str, timed_out: bool = False):
        super().__init__(reason)
        self.reason, self.timed_out = reason, timed_out


@dataclass
class CaseResult:
    reply: Reply
    output: torch.Tensor | None  # the output's bytes, copied out of the arena (CPU)
    wall_s: float


@dataclass
class Session:
    link: Link
    arena: Arena
    input_offset: int  # where request inputs go
    output_offset: int  # where outputs come back
    output_capacity: int
    pid: int = 0
    sandbox: dict[str, Any] = field(default_factory=dict)
    watch: Callable[[], str | None] | None = None  # a reason to give up while waiting, or None
    pauser: ProcessPause | None = None  # stops the solution's side between windows

    def __post_init__(self) -> None:
        if self.pauser is None and self.pid > 0:
            self.pauser = ProcessPause(self.pid, [self.pid])

    @property
    def paused(self) -> bool:
        return self.pauser is not None and self.pauser.is_stopped(self.pid)

    def pause(self) -> None:
        """Stop this process and everything of the solution's side until the next request, and
        check that all of it stopped (`SessionLost` if not)."""
        if self.pauser is not None:
            try:
                self.pauser.stop()
            except TooManyProcesses as exc:  # a fork bomb: everything is stopped; the reap kills it
                raise SessionLost(str(exc)) from None
            except NotStopped as exc:
                raise SessionLost(f"{STOP_CHECK}: {exc}") from None

    def resume(self, check: bool = True) -> None:
        """Continue this process alone (what it started stays stopped), after checking that it
        did not run while paused; `check=False` once the session is lost anyway."""
        if self.pauser is not None:
            try:
                self.pauser.resume(self.pid, check=check)
            except NotStopped as exc:
                raise SessionLost(f"{STOP_CHECK}: {exc}") from None

    def check_others_stopped(self) -> None:
        """`SessionLost` unless everything of the solution's side but this process stayed
        stopped since it was paused (call it once this process has armed)."""
        if self.pauser is not None:
            try:
                self.pauser.others_still(self.pid)
            except NotStopped as exc:
                raise SessionLost(f"{STOP_CHECK}: {exc}") from None

    def send(self, message: Any) -> None:
        """Send `message` without waiting for its reply (`receive_reply` takes it later)."""
        self.resume()
        try:
            self.link.send(to_json(message) if not isinstance(message, dict) else message)
        except PeerGone as exc:
            raise SessionLost(f"the solution process exited or was killed ({exc})") from None

    def receive_reply(self, timeout_s: float, expect: tuple[str, ...]) -> Reply:
        """The next reply, parsed; it must be one of `expect` (or `failed`)."""
        try:
            reply = parse_reply(self._receive(timeout_s))
        except Deadline:
            raise SessionLost(
                f"timed out: no {expect[0]} within {timeout_s:.0f} s (the solution process was killed)",
                timed_out=True,
            ) from None
        except PeerGone as exc:
            raise SessionLost(f"the solution process exited or was killed ({exc})") from None
        except ProtocolError as exc:
            raise SessionLost(f"the solution process broke the protocol: {exc}") from None
        if reply.kind not in expect + ("failed",):
            raise SessionLost(f"the solution process answered {reply.kind!r} where {expect[0]} was due")
        return reply

    def request(self, message: Any, timeout_s: float, expect: tuple[str, ...]) -> tuple[Reply, float]:
        """Send `message`, wait for its reply; (reply, seconds by the supervisor's clock, which
        include resuming a paused process)."""
        started = time.perf_counter()
        self.send(message)
        reply = self.receive_reply(timeout_s, expect)
        return reply, time.perf_counter() - started

    def _receive(self, timeout_s: float) -> dict[str, Any]:
        """Wait in short slices, so `watch` (say, an output flood) can end the wait early."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return self.link.receive(min(WATCH_INTERVAL_S, max(deadline - time.monotonic(), 0.0)))
            except Deadline:
                if time.monotonic() >= deadline:
                    raise
            why = self.watch() if self.watch is not None else None
            if why:
                raise SessionLost(why)

    def write_inputs(self, inputs: list[Any]) -> list[dict[str, Any]]:
        """Put the tensors of `inputs` into the arena's input region; the request's `args`."""
        layout, args = Layout(self.input_offset), []
        for x in inputs:
            if isinstance(x, torch.Tensor):
                offset = layout.take(tensor_nbytes(x))
                if layout.end > self.output_offset:
                    raise RuntimeError("the arena's input region is too small for this case")
                args.append({"tensor": self.arena.put(offset, x.contiguous()).to_json()})
            else:
                args.append({"value": _json_value(x)})
        return args

    def write_state(self, state: dict[str, torch.Tensor], layout: Layout) -> dict[str, TensorRef]:
        refs = {}
        for name, tensor in state.items():
            refs[name] = self.arena.put(layout.take(tensor_nbytes(tensor)), tensor.detach().cpu().contiguous())
        if layout.end > self.output_offset:
            raise RuntimeError("the arena's input region is too small for the state dict")
        return refs

    def read_output(
        self, info: OutputInfo, copy: Callable[[torch.Tensor], torch.Tensor] | None = None
    ) -> torch.Tensor | None:
        """A copy of the output the reply names (`copy` of its arena view, by default a clone),
        when it lies in the output region. A copy: the solution process can still write there."""
        ref = info.ref
        if ref is None:
            return None
        if ref.offset < self.output_offset or ref.offset + ref.nbytes > self.output_offset + self.output_capacity:
            raise SessionLost(f"the solution process pointed an output outside its slot (offset {ref.offset})")
        if tuple(ref.shape) != info.shape or ref.dtype != info.dtype:
            raise SessionLost("the solution process described an output unlike the one it wrote")
        view = self.arena.view(ref)
        return copy(view) if copy is not None else view.clone()

    def slot(self) -> Slot:
        return Slot(self.output_offset, self.output_capacity)


def _json_value(x: Any) -> Any:
    if isinstance(x, (bool, int, float, str)) or x is None:
        return x
    if isinstance(x, (list, tuple)):
        return [_json_value(v) for v in x]
    raise TypeError(f"a problem input of type {type(x).__name__} cannot be sent to the solution process")
