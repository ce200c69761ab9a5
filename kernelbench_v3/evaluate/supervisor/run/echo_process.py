"""The trusted echo's process in one evaluation (`EchoProcess`): forked ahead, while the
solution process runs its cases, then taken up by timing, or let go unused.

Its start (the zygote's fork, the sandbox and a CUDA context: about 0.3 s on an H100) made most
of `solution_timing_setup` while timing waited for it; forked ahead, it overlaps the cases. The
echo is the evaluator's own code (`timing.echo`) on an arena of its own, like the solution
process a child of the zygote under the same solution turn, so it runs beside no other
evaluation's solution either way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...protocol.channel import Arena
from ...protocol.messages import Failed, Finish
from ..session import Session, SessionLost
from ..timing import ECHO_ARENA_BYTES, echo_folder

DROP_LIMIT_S = 5.0  # an unused echo's ready and finish: its evaluation has already ended badly


class EchoProcess:
    """`fork()` early; `start()` (a `SolutionTiming.start_process`) takes the forked process up,
    or forks one then; `drop()` lets an echo that timing never took up finish as a used one does,
    so the zygote's reap finds nothing of the evaluator's to count as left behind."""

    def __init__(
        self,
        open_session: Callable[[Path, Arena], Session],
        setup: Callable[[Session, str], Any],
        work: Path,
        start_limit_s: float,
    ):
        self.open_session, self.setup, self.work, self.start_limit_s = open_session, setup, work, start_limit_s
        self.ahead: tuple[Session, Arena] | None = None
        self.folder = work / "echo"  # written by the first fork (`timing.echo_folder`)

    def fork(self) -> None:
        """Fork the echo now. A fork that fails here is tried again by `start`."""
        try:
            self.ahead = self._fork()
        except Exception:
            self.ahead = None

    def start(self) -> tuple[Session, Arena]:
        """The echo's process, started and set up, and its arena; SessionLost when it cannot be."""
        ahead, self.ahead = self.ahead, None
        process, arena = ahead if ahead is not None else self._fork()
        try:
            ready = process.receive_reply(self.start_limit_s, ("ready",))
            reply = self.setup(process, str(self.folder / "solution.py")) if ready.kind == "ready" else None
            if reply is None or isinstance(reply, Failed):
                raise SessionLost(f"the evaluator's echo process could not start: {getattr(reply, 'error', '')[:300]}")
        except BaseException:
            arena.close()
            raise
        return process, arena

    def drop(self) -> None:
        """Let an echo forked ahead and never taken up finish (within DROP_LIMIT_S a step, else the
        reap kills it); nothing when there is none."""
        if self.ahead is None:
            return
        (process, arena), self.ahead = self.ahead, None
        try:
            if process.receive_reply(DROP_LIMIT_S, ("ready",)).kind == "ready":
                process.request(Finish(), DROP_LIMIT_S, ("finished",))
        except Exception:  # cleanup after a failed evaluation: the reap ends whatever is left
            pass
        finally:
            arena.close()

    def _fork(self) -> tuple[Session, Arena]:
        arena = Arena.create(ECHO_ARENA_BYTES)
        try:
            self.folder = echo_folder(self.work)
            return self.open_session(self.folder, arena), arena
        except BaseException:
            arena.close()
            raise


__all__ = ["EchoProcess"]
