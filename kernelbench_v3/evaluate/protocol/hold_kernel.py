"""HOLD's device code (`protocol.hold`), as PTX the driver loads into the timer's context: the
words it reads and writes, and the kernel built from a few spin loops. Kept apart from the host
side that drives it so each reads on its own."""

from __future__ import annotations

# The timer's words in its private page (bytes), a cache line apart; counters on the device.
GO_AT, ARMED_AT, PREP_AT, PREPPED_AT = 0, 128, 256, 384
ARRIVED, PREPPED_COUNT, PREP_FLAG, RELEASE_FLAG, EXIT_AT = 0, 4, 8, 12, 16  # bytes into the counters
COUNTER_WORDS = 6  # 32-bit words: EXIT_AT is a 64-bit %globaltimer deadline


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
