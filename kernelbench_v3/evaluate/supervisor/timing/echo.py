"""The timing phase of one evaluation: the timing region, the trusted echo, then `clock`.

The supervisor allocates the region every timed call reads its inputs from (on CUDA a device
allocation shared by CUDA IPC, on the CPU a part of the solution's arena), starts the echo (a
process forked from the same zygote that runs `ECHO_SOURCE`, trusted code whose call is one
tiny kernel, with an arena and a doorbell of its own that the solution cannot reach) and hands
both to `clock.time_solution`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..protocol import cuda_ipc
from ..protocol.channel import ALIGN, Arena, TensorRef, tensor_nbytes
from ..protocol.doorbell import NBYTES as DOORBELL_BYTES
from ..protocol.doorbell import Doorbell
from ..protocol.messages import Failed, Finish, parse_reply
from . import clock
from .reference import ReferenceRun, expected_on_device
from .session import Session, SessionLost
from .timing.memory import TimedMemory, set_bytes
from .timing.stats import CallPlan

CPU_TIMED_SETS = 2  # input sets and output slots of the CPU timing region (in the arena)
CUDA_TIMED_SETS = 4  # input sets (each with its CUDA graph) of the CUDA timing region
CUDA_TIMING_BYTES = 12 << 30  # the CUDA timing region, at most (and at most this share of the device:)
CUDA_TIMING_SHARE = 0.1
CUDA_ALLOCATION_ROUND = 2 << 20  # torch's caching allocator rounds large blocks to this
DOORBELL_OFFSET = 0  # the doorbell's words lead every arena; requests' inputs follow at ALIGN
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


def cpu_region_bytes(ref: ReferenceRun) -> int:
    """Bytes of the CPU timing region (inside the solution's arena)."""
    main = ref.cases[ref.order[0]]
    return CPU_TIMED_SETS * set_bytes(main.inputs, tensor_nbytes(main.saved["expected"]))


@dataclass
class TimingContext:
    """What the timing phase needs from its evaluation."""

    session: Session  # the solution's
    ref: ReferenceRun
    case: str  # the correctness case whose inputs template the timed calls
    device: str
    tolerance: str
    cpu_region: tuple[int, int]  # (offset, bytes) of the CPU timing region in the solution's arena
    open_session: Callable[[Path, Arena], Session]
    setup: Callable[[Session, str], Any]  # sends Setup for a trusted file; the reply
    work: Path
    start_limit_s: float
    window_limit_s: float
    capture_limit_s: float


def run(ctx: TimingContext, seconds: float, rng: random.Random) -> clock.TimingOutcome:
    """Time the solution (raises SessionLost; TimingUnavailable when the problem cannot be timed)."""
    memory, region = _memory(ctx)
    main = ctx.ref.cases[ctx.case]
    verifier = clock.Verifier(
        lambda inputs, float64: expected_on_device(ctx.ref, inputs, ctx.device, float64),
        main.entry,
        ctx.tolerance,
        ctx.ref.precision,
    )
    echo, echo_arena = _start_echo(ctx)
    try:
        sides = clock.Sides(
            ctx.session,
            Doorbell(ctx.session.arena.view(TensorRef(DOORBELL_OFFSET, (DOORBELL_BYTES,), "uint8"))),
            echo,
            Doorbell(echo_arena.view(TensorRef(DOORBELL_OFFSET, (DOORBELL_BYTES,), "uint8"))),
        )
        return clock.time_solution(
            sides,
            memory,
            region,
            ctx.ref.shapes["main"].module,
            CallPlan.for_device(ctx.device, seconds),
            verifier,
            ctx.window_limit_s,
            DOORBELL_OFFSET,
            rng,
            capture_timeout_s=ctx.capture_limit_s,
        )
    finally:
        try:
            echo.request(Finish(), 10.0, ("finished",))
        except SessionLost:
            pass
        echo_arena.close()
        if ctx.device == "cuda":
            cuda_ipc.close_exported()


def _memory(ctx: TimingContext) -> tuple[TimedMemory, dict[str, Any]]:
    main = ctx.ref.cases[ctx.case]
    expected = main.saved["expected"]
    per_set = set_bytes(main.inputs, tensor_nbytes(expected))
    if ctx.device == "cuda":
        free, total = torch.cuda.mem_get_info()
        budget = min(CUDA_TIMING_BYTES, int(CUDA_TIMING_SHARE * total), free // 4)
        count = int(max(1, min(CUDA_TIMED_SETS, budget // per_set)))
        # A whole number of the allocator's 2 MiB pages: the IPC handle exports the whole
        # allocation, so no other tensor of the supervisor's may ever share it.
        nbytes = -(-count * per_set // CUDA_ALLOCATION_ROUND) * CUDA_ALLOCATION_ROUND
        region = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        description = {"cuda_ipc": cuda_ipc.export(region)}
    else:
        offset, nbytes = ctx.cpu_region
        count = CPU_TIMED_SETS
        region = ctx.session.arena.view(TensorRef(offset, (nbytes,), "uint8"))
        description = {"arena": [offset, nbytes]}
    memory = TimedMemory(region, main.inputs, expected.shape, expected.dtype, count)
    memory.fill(main.inputs)  # never garbage under the capture's warm-up calls
    return memory, description


def _start_echo(ctx: TimingContext) -> tuple[Session, Arena]:
    """The trusted echo, set up, its timed calls prepared (and captured on CUDA)."""
    folder = ctx.work / "echo"
    folder.mkdir(mode=0o700, exist_ok=True)
    (folder / "solution.py").write_text(ECHO_SOURCE, encoding="utf-8")
    arena = Arena.create(ECHO_ARENA_BYTES)
    try:
        echo = ctx.open_session(folder, arena)
        ready = parse_reply(echo.link.receive(ctx.start_limit_s))
        reply = ctx.setup(echo, str(folder / "solution.py")) if ready.kind == "ready" else None
        if reply is None or isinstance(reply, Failed):
            raise SessionLost(f"the evaluator's echo process could not start: {getattr(reply, 'error', '')[:300]}")
        region = arena.view(TensorRef(ALIGN, (ECHO_ARENA_BYTES - ALIGN,), "uint8"))
        memory = TimedMemory(region, [], (1,), torch.float32, 1)
        clock.prepare(echo, {"arena": [ALIGN, ECHO_ARENA_BYTES - ALIGN]}, memory, DOORBELL_OFFSET, ctx.window_limit_s)
        if ctx.device == "cuda":
            clock.capture(echo, ctx.capture_limit_s)
    except (SessionLost, OSError) as exc:
        from .timing.memory import TimingUnavailable

        raise TimingUnavailable(f"the evaluator's echo process could not start: {exc}") from None
    return echo, arena
