"""The trusted echo: a process forked from the same zygote as the solution's that runs
`ECHO_SOURCE`, trusted code whose call is one tiny kernel, with an arena and a doorbell of its own
that the solution cannot reach. Its windows stand beside the solution's in every measurement
(`measure`): what they hold is the gate, the context switch and a launch's fixed cost, with no
work of the solution's.

`echo_folder` writes the source into a folder of its own; the evaluation starts a process on it
with an arena of `ECHO_ARENA_BYTES` (`start_process`: forked while the solution runs its cases,
then the candidate phase's handshake and setup), and `start_echo` prepares its timed calls
through its `TimedProcess` (captured on CUDA). An echo that cannot start makes the problem
untimed (`TimingUnavailable`), never the solution wrong.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import torch

from ...protocol.channel import ALIGN, Arena
from ..session import Session, SessionLost
from .errors import TimingUnavailable
from .memory import TimedMemory
from .timed_process import TimedProcess

ECHO_ARENA_BYTES = 4 * ALIGN

ECHO_SOURCE = """import torch


class Model(torch.nn.Module):
    \"\"\"The evaluator's trusted echo: one tiny kernel per call, for timing the protocol itself.\"\"\"

    def __init__(self, *args, **kwargs):
        super().__init__()
        self.register_buffer("tiny", torch.zeros(1), persistent=False)

    def forward(self, *args):
        return self.tiny + 1
"""


def echo_folder(work: Path) -> Path:
    """The echo's folder in the evaluation's `work`, `ECHO_SOURCE` its solution.py."""
    folder = work / "echo"
    folder.mkdir(mode=0o700, exist_ok=True)
    (folder / "solution.py").write_text(ECHO_SOURCE, encoding="utf-8")
    return folder


def start_echo(
    start_process: Callable[[], tuple[Session, Arena]],
    timeout_s: float,
    capture_timeout_s: float,
    cuda: bool,
    clock: Callable[[], float] = time.perf_counter,
    keep_graphs: bool = False,
) -> tuple[TimedProcess, Arena]:
    """The trusted echo (`start_process`: its process, set up, and its arena), its timed calls
    prepared (and captured on CUDA, its graphs kept for a spin node if `keep_graphs`); its arena."""
    try:
        session, arena = start_process()
    except (SessionLost, OSError) as exc:
        raise TimingUnavailable(f"the evaluator's echo process could not start: {exc}") from None
    try:
        echo = TimedProcess.of(session, timeout_s, cuda, clock)
        memory = TimedMemory(echo.view(ALIGN, ECHO_ARENA_BYTES - ALIGN), [], (1,), torch.float32, 1)
        echo.prepare({"arena": [ALIGN, ECHO_ARENA_BYTES - ALIGN]}, memory.layout())
        if cuda:
            echo.capture(capture_timeout_s, keep_graphs)
    except (SessionLost, OSError) as exc:
        arena.close()
        raise TimingUnavailable(f"the evaluator's echo process could not start: {exc}") from None
    return echo, arena
