"""The occupancy gate: the timer holds a call by owning every thread slot of the GPU.

Under MPS the clients' kernels share the SMs, and a block starts only where an SM has room for
it. HOLD, a kernel of the timer's own process, takes all of that room: as many blocks of 1024
threads as fill every SM's thread slots. Its block 0 waits until every block is resident and
then writes ARMED; from then on no kernel of any other process can start. The call is enqueued
after ARMED and waits in the hardware's queue. At PREP, HOLD's threads write the call's inputs
(a copy of the timer's stage into the set the call reads) and clear the L2, then block 0 writes
PREPPED; at GO every block exits, all at one deadline, and the call's kernels take the SMs.

Why (docs/timing.md, "The occupancy gate"): nothing of the solution's reads GO, which lives in
a page only the timer's process maps, so no solution can open its window sooner than an honest
call; the echo is a one-thread kernel queued the same way that writes DONE at once, so none can
close it faster either. The inputs exist only while HOLD holds every SM, so no kernel of the
solution's can see them before GO, and a kernel of the solution's left resident keeps HOLD from
ever arming (`HoldRefused`). Work that needs no SM (a copy engine's copy, a stream's memory
operation) is not held: the solution's whole side is stopped from ARMED to DONE, and an output
moved before the window is scored under the roofline (docs/threat-model.md).

HOLD is bounded: every wait ends after `limit_ns` of %globaltimer, and `Hold.release` lets it go
at once (every phase reads its word as reached), so an abandoned timing never keeps the GPU.
Without MPS the GPU time-slices contexts and HOLD holds nothing of another's: it is not used.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable

from .gate import Driver, GateUnavailable, private_block
from .hold_kernel import ARMED_AT, COUNTER_WORDS, GO_AT, HOLD_PTX, PREP_AT, PREPPED_AT

MAX_BLOCK_THREADS = 1024
HOLD_THREADS_ENV = "KBV3_HOLD_THREADS"  # HOLD's block size, for measuring (`hold_block_threads`)
# Every block of HOLD leaves at one %globaltimer deadline this long after block 0 saw GO, not as
# each happens to see the release: a block of the call starts wherever an SM has room, and SMs
# freed a little apart took all of a small grid's blocks. The deadline spreads a grid over more
# SMs (80 of 132 against 12 on the H100) but leaves the busiest as crowded, so small grids are
# still scored up to 2-2.6x their time: why this gate is not the default (docs/timing.md,
# "Where a held call's blocks land"). The echo is held the same way, so the wait cancels.
RELEASE_DELAY_NS = 2000
WORDS_BYTES = 512
ARM_LIMIT_S = 2.0  # every block resident within this, or a kernel of another process holds an SM
PREP_LIMIT_S = 10.0
SYNC_LIMIT_S = 10.0


_STILL_RUNNING: list[Hold] = []  # holds whose blocks had not all ended when they were closed


class HoldRefused(GateUnavailable):
    """HOLD could not take every SM: a kernel of another process was resident."""


def hold_shape(slots_per_sm: int, block_threads: int | None = None) -> tuple[int, int]:
    """(threads a block, blocks an SM) that take exactly an SM's thread slots: by default the
    fewest blocks, 1024 x 2 on Hopper and the A100 (2048 slots), 768 x 2 on the RTX 3090 (1536);
    with `block_threads`, blocks of that many threads (`hold_block_threads`)."""
    per_sm = -(-slots_per_sm // MAX_BLOCK_THREADS) if block_threads is None else slots_per_sm // block_threads
    exact = block_threads is None or per_sm * block_threads == slots_per_sm
    if per_sm < 1 or slots_per_sm % per_sm or not exact or slots_per_sm // per_sm > MAX_BLOCK_THREADS:
        raise GateUnavailable(f"{slots_per_sm} thread slots per SM do not split into equal blocks")
    return slots_per_sm // per_sm, per_sm


def hold_block_threads() -> int | None:
    """HOLD's block size as KBV3_HOLD_THREADS names it (a multiple of 32, at most 1024), for
    measuring where a held call's blocks land (`benchmarks/diagnostics/hold_spread_gpu.py`);
    None (the fewest blocks) when unset. Too many blocks for an SM's block slots and HOLD never
    arms: timing then ends as a busy GPU, never a wrong figure."""
    raw = os.environ.get(HOLD_THREADS_ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) % 32 or not 32 <= int(raw) <= MAX_BLOCK_THREADS:
        raise ValueError(f"{HOLD_THREADS_ENV}={raw!r}: expected a multiple of 32 from 32 to {MAX_BLOCK_THREADS}")
    return int(raw)


class Hold:
    """HOLD as the timer drives it, one launch per window (module docstring). `seq` counts the
    launches; its words live in a private page of this process, its counters on the device."""

    def __init__(
        self,
        driver: Driver,
        limit_s: float,
        clock: Callable[[], float] = time.perf_counter,
        release_delay_ns: int = RELEASE_DELAY_NS,
        block_threads: int | None = None,
    ):
        import torch

        self.driver, self.clock = driver, clock
        self.limit_ns = int(limit_s * 1e9)
        self.release_delay_ns = int(release_delay_ns)  # 0: each block leaves as it reads the release
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        slots = int(getattr(props, "max_threads_per_multi_processor", 0) or 2048)
        self.threads, per_sm = hold_shape(slots, block_threads if block_threads is not None else hold_block_threads())
        self.blocks = per_sm * int(props.multi_processor_count)
        self._page, self._view, address = private_block()
        self._words = self._view[:WORDS_BYTES].cast("I")
        self.words_device = driver.register(address, WORDS_BYTES, fresh=True)
        self._address = address
        self.counters = torch.zeros(COUNTER_WORDS, dtype=torch.int32, device="cuda")
        self.sink = torch.zeros(1, dtype=torch.int32, device="cuda")
        self.stream = torch.cuda.ExternalStream(driver.create_stream())
        self.function = driver._kernel(HOLD_PTX, b"kbv3_hold")
        self.seq = 0

    def _word(self, at: int) -> int:
        return int(self._words[at // 4])

    def _set(self, at: int, value: int) -> None:
        self._words[at // 4] = value

    def take(self, src: int, dst: int, copy_bytes: int, flush: tuple[int, int], dirty: tuple[int, int]) -> float:
        """Launch HOLD for the next window (its prep copies `copy_bytes` from `src` to `dst`,
        reads `flush` and writes `dirty`, each (device address, bytes)) and wait until it holds
        every SM; seconds to ARMED. Raises HoldRefused (HOLD let go) if it cannot."""
        self.seq += 1
        seq = self.seq
        args = [
            ctypes.c_uint64(self.words_device),
            ctypes.c_uint64(self.counters.data_ptr()),
            ctypes.c_uint64(src),
            ctypes.c_uint64(dst),
            ctypes.c_uint64(copy_bytes // 16),
            ctypes.c_uint64(flush[0]),
            ctypes.c_uint64(flush[1] // 16),
            ctypes.c_uint64(dirty[0]),
            ctypes.c_uint64(dirty[1] // 16),
            ctypes.c_uint64(self.sink.data_ptr()),
            ctypes.c_uint32(seq),
            ctypes.c_uint32(self.blocks),
            ctypes.c_uint64(self.limit_ns),
            ctypes.c_uint64(self.release_delay_ns),
        ]
        self.driver.launch(self.function, self.stream, self.blocks, self.threads, *args)
        armed = self._until(ARMED_AT, seq, ARM_LIMIT_S)
        if armed is None:
            self.release()
            raise HoldRefused(
                f"HOLD could not take every SM within {ARM_LIMIT_S:.0f} s: a kernel of another process was resident"
            )
        return armed

    def prepare(self) -> float:
        """Have HOLD write the inputs and clear the L2; seconds from PREP to PREPPED."""
        started = self.clock()
        self._set(PREP_AT, self.seq)
        if self._until(PREPPED_AT, self.seq, PREP_LIMIT_S) is None:
            self.release()
            raise GateUnavailable(f"HOLD did not finish writing the inputs within {PREP_LIMIT_S:.0f} s")
        return self.clock() - started

    def go(self) -> None:
        """Open the window: HOLD's blocks exit and the call's kernels take the SMs."""
        self._set(GO_AT, self.seq)

    def release(self) -> bool:
        """Let HOLD go whatever phase it is in; whether it has ended (waited for, bounded: blocks
        kept out by another process's resident kernel start, and end, only once it is gone)."""
        self._set(PREP_AT, self.seq)
        self._set(GO_AT, self.seq)
        started = time.monotonic()
        while not self.stream.query():  # HOLD is the only work of its stream
            if time.monotonic() - started > SYNC_LIMIT_S:
                return False
            time.sleep(0.0005)
        return True

    def close(self) -> bool:
        """Release HOLD and drop this context's registration of the words; False if HOLD had
        not ended: then the words stay registered and mapped for as long as this process lives
        (a block that starts later still reads GO), as `_STILL_RUNNING` keeps them."""
        if not self.release():
            _STILL_RUNNING.append(self)
            return False
        self._words.release()
        self.driver.unregister(self._address)
        return True

    def _until(self, at: int, seq: int, limit_s: float) -> float | None:
        started = self.clock()
        spins = 0
        while self._word(at) < seq:
            spins += 1
            if spins % 4096 == 0 and self.clock() - started > limit_s:
                return None
        return self.clock() - started


def launch_args_count() -> int:
    """HOLD's parameters, as `Hold.take` packs them (the tests hold the PTX to it)."""
    return HOLD_PTX.decode().split("(", 1)[1].split(")", 1)[0].count(".param")
