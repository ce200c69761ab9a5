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

MAX_BLOCK_THREADS = 1024
HOLD_THREADS_ENV = "KBV3_HOLD_THREADS"  # HOLD's block size, for measuring (`hold_block_threads`)
# The timer's words in its private page (bytes), a cache line apart; counters on the device.
GO_AT, ARMED_AT, PREP_AT, PREPPED_AT = 0, 128, 256, 384
ARRIVED, PREPPED_COUNT, PREP_FLAG, RELEASE_FLAG, EXIT_AT = 0, 4, 8, 12, 16  # bytes into the counters
COUNTER_WORDS = 6  # 32-bit words: EXIT_AT is a 64-bit %globaltimer deadline
# Every block of HOLD leaves at one %globaltimer deadline this long after block 0 saw GO, not as
# each happens to see the release: a block of the call starts wherever an SM has room, so SMs
# freed a little apart took all of a small grid's blocks (two to three times its time on the
# H100, docs/timing.md "The occupancy gate in the evaluator"). Long enough for every block to
# read the release first; the echo is held the same way, so the wait cancels in the net time.
RELEASE_DELAY_NS = 2000
WORDS_BYTES = 512
ARM_LIMIT_S = 2.0  # every block resident within this, or a kernel of another process holds an SM
PREP_LIMIT_S = 10.0
SYNC_LIMIT_S = 10.0


_STILL_RUNNING: list[Hold] = []  # holds whose blocks had not all ended when they were closed


class HoldRefused(GateUnavailable):
    """HOLD could not take every SM: a kernel of another process was resident."""


def _wait(label: str, read: str, done: str, limit: str) -> str:
    """Spin until `read`'s 32-bit word reaches seq (%r1; wrap-aware), then go to `done`; after
    limit_ns (%rd3 since %rd2) go to `limit`. Uses %r6, %r7, %p3, %p4, %rd4, %rd5."""
    return f"""{label}:
    ld.volatile.u32 %r6, [{read}];
    sub.s32 %r7, %r6, %r1;
    setp.ge.s32 %p3, %r7, 0;
    @%p3 bra {done};
    mov.u64 %rd4, %globaltimer;
    sub.s64 %rd5, %rd4, %rd2;
    setp.lt.u64 %p4, %rd5, %rd3;
    @%p4 bra {label};
    bra {limit};
"""


def _count(label: str, counter: str, done: str, limit: str) -> str:
    """Spin until the counter reaches blocks * seq (%r8), then `done`; after limit_ns, or once
    the host has rung GO (a release), `limit`."""
    return f"""{label}:
    ld.volatile.u32 %r6, [{counter}];
    setp.ge.u32 %p3, %r6, %r8;
    @%p3 bra {done};
    ld.volatile.u32 %r6, [%rd10];
    sub.s32 %r7, %r6, %r1;
    setp.ge.s32 %p3, %r7, 0;
    @%p3 bra {limit};
    mov.u64 %rd4, %globaltimer;
    sub.s64 %rd5, %rd4, %rd2;
    setp.lt.u64 %p4, %rd5, %rd3;
    @%p4 bra {label};
    bra {limit};
"""


def _grid_stride(label: str, body: str, count: str) -> str:
    """for (i = global thread; i < count; i += grid threads) body, i in %rd20, byte offset %rd21."""
    return f"""    mov.u64 %rd20, %rd30;
{label}:
    setp.ge.u64 %p5, %rd20, {count};
    @%p5 bra {label}_END;
    shl.b64 %rd21, %rd20, 4;
{body}    add.u64 %rd20, %rd20, %rd31;
    bra {label};
{label}_END:
"""


# kbv3_hold(words, counters, src, dst, copy_vecs, flush, flush_vecs, dirty, dirty_vecs, sink,
#           seq, blocks, limit_ns, release_delay_ns): the module docstring's HOLD. Vectors are
#           16 bytes. Every block waits out its exit until the deadline block 0 set at GO (at
#           most release_delay_ns + 100 us after it read the release).
HOLD_PTX = (
    """.version 7.0
.target sm_70
.address_size 64

.visible .entry kbv3_hold(.param .u64 words, .param .u64 counters, .param .u64 src,
    .param .u64 dst, .param .u64 copy_vecs, .param .u64 flush, .param .u64 flush_vecs,
    .param .u64 dirty, .param .u64 dirty_vecs, .param .u64 sink, .param .u32 seq,
    .param .u32 blocks, .param .u64 limit_ns, .param .u64 release_delay_ns)
.maxntid 1024, 1, 1
.minnctapersm 2
{
    .reg .pred %p<8>;
    .reg .b32 %r<24>;
    .reg .b64 %rd<40>;

    ld.param.u64 %rd1, [words];
    ld.param.u64 %rd6, [counters];
    ld.param.u32 %r1, [seq];
    ld.param.u32 %r2, [blocks];
    ld.param.u64 %rd3, [limit_ns];
    mov.u64 %rd2, %globaltimer;
    mul.lo.u32 %r8, %r2, %r1;
    add.u64 %rd10, %rd1, """
    + str(GO_AT)
    + """;
    add.u64 %rd11, %rd1, """
    + str(ARMED_AT)
    + """;
    add.u64 %rd12, %rd1, """
    + str(PREP_AT)
    + """;
    add.u64 %rd13, %rd1, """
    + str(PREPPED_AT)
    + """;
    add.u64 %rd14, %rd6, """
    + str(ARRIVED)
    + """;
    add.u64 %rd15, %rd6, """
    + str(PREPPED_COUNT)
    + """;
    add.u64 %rd16, %rd6, """
    + str(PREP_FLAG)
    + """;
    add.u64 %rd17, %rd6, """
    + str(RELEASE_FLAG)
    + """;
    add.u64 %rd18, %rd6, """
    + str(EXIT_AT)
    + """;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ntid.x;
    mov.u32 %r9, %nctaid.x;
    mul.wide.u32 %rd30, %r4, %r5;
    cvt.u64.u32 %rd32, %r3;
    add.u64 %rd30, %rd30, %rd32;
    mul.wide.u32 %rd31, %r9, %r5;
    setp.ne.u32 %p1, %r3, 0;
    setp.ne.u32 %p2, %r4, 0;
    setp.ne.u32 %p6, %r3, %r3;
    @%p1 bra JOIN1;
    atom.add.u32 %r10, [%rd14], 1;
    @%p2 bra FOLLOW1;
"""
    + _count("ALL", "%rd14", "ARMED", "GIVEUP")
    + """ARMED:
    st.volatile.u32 [%rd11], %r1;
    membar.sys;
"""
    + _wait("PREPWAIT", "%rd12", "PREPGO", "GIVEUP")
    + """GIVEUP:
    mov.pred %p6, 1;
PREPGO:
    st.volatile.u32 [%rd16], %r1;
    bra JOIN1;
"""
    + _wait("FOLLOW1", "%rd16", "JOIN1", "JOIN1")
    + """JOIN1:
    barrier.sync 0;
    ld.param.u64 %rd22, [src];
    ld.param.u64 %rd23, [dst];
    ld.param.u64 %rd24, [copy_vecs];
"""
    + _grid_stride(
        "COPY",
        """    add.u64 %rd25, %rd22, %rd21;
    ld.global.v4.u32 {%r12, %r13, %r14, %r15}, [%rd25];
    add.u64 %rd25, %rd23, %rd21;
    st.global.v4.u32 [%rd25], {%r12, %r13, %r14, %r15};
""",
        "%rd24",
    )
    + """    ld.param.u64 %rd22, [flush];
    ld.param.u64 %rd24, [flush_vecs];
    mov.u32 %r16, 0;
"""
    + _grid_stride(
        "FLUSH",
        """    add.u64 %rd25, %rd22, %rd21;
    ld.global.cg.v4.u32 {%r12, %r13, %r14, %r15}, [%rd25];
    xor.b32 %r16, %r16, %r12;
    xor.b32 %r16, %r16, %r15;
""",
        "%rd24",
    )
    + """    ld.param.u64 %rd22, [dirty];
    ld.param.u64 %rd24, [dirty_vecs];
    mov.u32 %r12, 7;
"""
    + _grid_stride(
        "DIRTY",
        """    add.u64 %rd25, %rd22, %rd21;
    st.global.v4.u32 [%rd25], {%r12, %r12, %r12, %r12};
""",
        "%rd24",
    )
    + """    setp.ne.u32 %p7, %r16, 1374389535;
    @%p7 bra SUNK;
    ld.param.u64 %rd22, [sink];
    st.global.u32 [%rd22], %r16;
SUNK:
    barrier.sync 0;
    @%p1 bra JOIN2;
    membar.gl;
    atom.add.u32 %r10, [%rd15], 1;
    @%p2 bra FOLLOW2;
    @%p6 bra RELEASE;
"""
    + _count("PALL", "%rd15", "PREPPED", "RELEASE")
    + """PREPPED:
    membar.sys;
    st.volatile.u32 [%rd13], %r1;
    membar.sys;
"""
    + _wait("GOWAIT", "%rd10", "RELEASE", "RELEASE")
    + """RELEASE:
    ld.param.u64 %rd27, [release_delay_ns];
    mov.u64 %rd28, %globaltimer;
    add.u64 %rd26, %rd28, %rd27;
    st.volatile.u64 [%rd18], %rd26;
    membar.gl;
    st.volatile.u32 [%rd17], %r1;
    bra EXITAT;
"""
    + _wait("FOLLOW2", "%rd17", "FOLLOWED", "JOIN2")
    + """FOLLOWED:
    membar.gl;
    ld.volatile.u64 %rd26, [%rd18];
    ld.param.u64 %rd27, [release_delay_ns];
    mov.u64 %rd28, %globaltimer;
EXITAT:
    add.u64 %rd27, %rd27, 100000;
EXITWAIT:
    mov.u64 %rd4, %globaltimer;
    setp.ge.u64 %p4, %rd4, %rd26;
    @%p4 bra JOIN2;
    sub.u64 %rd5, %rd4, %rd28;
    setp.lt.u64 %p4, %rd5, %rd27;
    @%p4 bra EXITWAIT;
JOIN2:
    barrier.sync 0;
    ret;
}
\0"""
).encode()


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
