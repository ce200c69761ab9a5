"""The gate's device code, as PTX the driver loads into a context (`gate.Driver`): the spin
that holds a call at GO, the same with its seq read from memory (a graph's first node), the
fused echo that reads GO and writes DONE in one kernel, and the held echo (`DONE_NOW_PTX`), which
writes DONE the moment it runs (the occupancy gate's echo, `protocol.hold`); for a graph that
holds and closes its call itself (`gate_graph`), the DONE node (`DONE_AT_PTX`) and both nodes in
their Hopper form (`SPIN_AT_PDL_PTX`, `DONE_AT_PDL_PTX`), joined to the call's kernels by
programmatic edges. Each is one thread, and each spin stops after `limit_ns` of %globaltimer, so
a gate never rung cannot hold the GPU.

The spins and the fused echo share one hold (`_HOLD`): read the 32-bit word GO (%rd1) until (int)(GO - seq) >= 0,
cuStreamWaitValue32's GEQ, wrap-aware, with seq in %r1, or until limit_ns (%rd2) have passed;
then fall through to OPEN (opened) or return (never opened).
"""

_HOLD = """    mov.u64 %rd3, %globaltimer;
SPIN:
    ld.volatile.u32 %r2, [%rd1];
    sub.s32 %r3, %r2, %r1;
    setp.ge.s32 %p1, %r3, 0;
    @%p1 bra OPEN;
    mov.u64 %rd4, %globaltimer;
    sub.s64 %rd5, %rd4, %rd3;
    setp.lt.u64 %p2, %rd5, %rd2;
    @%p2 bra SPIN;
    ret;
OPEN:
"""


def _header(target: str) -> str:
    """A module's first lines: PTX 6.0 for sm_70 and up, 7.8 for sm_90 (griddepcontrol)."""
    version = "7.8" if target == "sm_90" else "6.0"
    return f".version {version}\n.target {target}\n.address_size 64\n"


def _kernel(entry: str, params: str, loads: str, opened: str, target: str = "sm_70") -> bytes:
    """One kernel: its parameters loaded (`loads` puts GO's address in %rd1, seq in %r1 and the
    limit in %rd2), the hold, then `opened`, for `target`."""
    return f"""{_header(target)}
.visible .entry {entry}({params})
{{
    .reg .pred %p<3>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<7>;

{loads}{_HOLD}{opened}    ret;
}}
\0""".encode()


# kbv3_gate_spin(word, seq, limit_ns): hold the stream until GO >= seq.
SPIN_PTX = _kernel(
    "kbv3_gate_spin",
    ".param .u64 word, .param .u32 seq, .param .u64 limit_ns",
    "    ld.param.u64 %rd1, [word];\n    ld.param.u32 %r1, [seq];\n    ld.param.u64 %rd2, [limit_ns];\n",
    "",
)

# kbv3_gate_spin_at(word, target, limit_ns): the same, its seq read from the 32-bit word `target`
# when it starts, so one node of it can head a graph replayed for every call
# (`Driver.gated_graph`): the call's seq sits in the doorbell's WAKE word while it is armed.
SPIN_AT_PTX = _kernel(
    "kbv3_gate_spin_at",
    ".param .u64 word, .param .u64 target, .param .u64 limit_ns",
    "    ld.param.u64 %rd1, [word];\n    ld.param.u64 %rd6, [target];\n    ld.param.u64 %rd2, [limit_ns];\n"
    "    ld.volatile.u32 %r1, [%rd6];\n",
    "",
)

# kbv3_gate_spin_at_pdl: the same on Hopper, and once GO opens it lets the graph's next kernels
# start at once (`griddepcontrol.launch_dependents`) instead of when it has ended and its memory
# is flushed: the kernels behind it by a programmatic edge (`gate_graph`) are launched no sooner
# than GO, since a spin never opened ends without the trigger, and they read nothing it wrote.
SPIN_AT_PDL_PTX = _kernel(
    "kbv3_gate_spin_at_pdl",
    ".param .u64 word, .param .u64 target, .param .u64 limit_ns",
    "    ld.param.u64 %rd1, [word];\n    ld.param.u64 %rd6, [target];\n    ld.param.u64 %rd2, [limit_ns];\n"
    "    ld.volatile.u32 %r1, [%rd6];\n",
    "    griddepcontrol.launch_dependents;\n",
    target="sm_90",
)

# kbv3_gate_echo(go, done, seq, limit_ns): the echo's whole call, the fastest release there is.
# Once GO opens it writes DONE = seq itself, behind a system-wide fence: no stream wait, no
# launch and no stream write sit between GO and DONE, so no call of a solution's can open its
# window sooner or close it faster. Never opened within limit_ns, it writes nothing (the
# timer's own bound reports the stuck call).
ECHO_PTX = _kernel(
    "kbv3_gate_echo",
    ".param .u64 go, .param .u64 done, .param .u32 seq, .param .u64 limit_ns",
    "    ld.param.u64 %rd1, [go];\n    ld.param.u64 %rd6, [done];\n    ld.param.u32 %r1, [seq];\n"
    "    ld.param.u64 %rd2, [limit_ns];\n",
    "    membar.sys;\n    st.volatile.u32 [%rd6], %r1;\n    membar.sys;\n",
)

# kbv3_done_now(done, seq): DONE = seq behind a system fence, the moment the kernel runs. The
# echo's call under the occupancy gate (`protocol.hold`): queued behind HOLD like any call, it
# starts when HOLD lets go, and no close of a call is faster than its first instruction.
DONE_NOW_PTX = b""".version 6.0
.target sm_70
.address_size 64

.visible .entry kbv3_done_now(.param .u64 done, .param .u32 seq)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<2>;

    ld.param.u64 %rd1, [done];
    ld.param.u32 %r1, [seq];
    st.volatile.u32 [%rd1], %r1;
    membar.sys;
    ret;
}
\0"""


def _done_at(entry: str, wait: str, target: str) -> bytes:
    return f"""{_header(target)}
.visible .entry {entry}(.param .u64 done, .param .u64 seq_word)
{{
    .reg .b32 %r<2>;
    .reg .b64 %rd<3>;

    ld.param.u64 %rd1, [done];
    ld.param.u64 %rd2, [seq_word];
{wait}    ld.volatile.u32 %r1, [%rd2];
    membar.sys;
    st.volatile.u32 [%rd1], %r1;
    membar.sys;
    ret;
}}
\0""".encode()


# kbv3_done_at(done, seq_word): the last node of a graph that closes its own call (`gate_graph`):
# DONE = the armed call's seq (the doorbell's WAKE word, as `SPIN_AT_PTX` reads it), written
# once every node ahead of it has ended. The fence ahead of the store orders the call's writes
# before DONE for the timer, which copies the outputs the moment it sees DONE.
DONE_AT_PTX = _done_at("kbv3_done_at", "", "sm_70")

# kbv3_done_at_pdl: the same on Hopper behind programmatic edges: it may start as the call's last
# kernels end, and `griddepcontrol.wait` holds it until they have completed and their memory is
# visible, so DONE still comes after every write of the call.
DONE_AT_PDL_PTX = _done_at("kbv3_done_at_pdl", "    griddepcontrol.wait;\n", "sm_90")
