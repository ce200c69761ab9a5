"""Could the timer hold a call by owning every SM, instead of the solution's process reading GO?

Today a call is held at GO by a kernel in the solution's own process that reads a host word, so
the solution can read GO itself (the gate inside its kernel), the echo must be the fastest
release there is (the fused echo), and every honest call pays about 2.6 us the echo has not
(docs/timing.md, "The fused echo"). A resident kernel of the solution's can also compute while
the timer writes the inputs (the open watcher hole, docs/threat-model.md).

The occupancy gate moves the hold into the timer's process. The timer launches HOLD: two blocks
of 1024 threads per SM, every thread slot of the GPU. Block 0 waits until every block is
resident (an arrival count), writes ARMED to a host word, and then reads GO; the others wait for
its flag. While HOLD is resident no block of any other MPS client can start, so the solution's
call, enqueued after ARMED, sits in the hardware's queue until the timer writes GO and HOLD's
blocks exit. Nothing of the solution's reads GO; a kernel of the solution's that was already
resident keeps HOLD from ever arming. The echo is then a one-thread kernel queued the same way
that writes DONE itself at once: no call can be released sooner or close faster.

This probe, one long-lived client under a private MPS daemon, the timer clearing the L2 before
each call, answers:
- does a queued kernel of another client start only after HOLD's release? (`early`: calls whose
  DONE was already written at GO; `dispatch_us`: the client kernel's first %globaltimer less
  HOLD's at release, never negative if it holds);
- what an honest call costs over the echo (`offsets_us`: window - rung - the echo's window, for
  a ladder kernel closed by the stream's write of DONE, as a graph and as a raw launch, and
  for one closed by its own kernel, the fastest a solution can close);
- whether a resident kernel of the client's keeps HOLD from arming (`watcher`: ms to ARMED
  behind a 20 ms resident kernel);
- the same lease's figures for today's gate (`shared_*`, `event_gate_gpu.run_variant`).

    PYTHONPATH=. python3 benchmarks/diagnostics/occupancy_gate_gpu.py OUT.jsonl [--calls 300]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import multiprocessing as mp
import statistics
import sys
import time
from multiprocessing import shared_memory
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from event_gate_gpu import _receive, run_variant  # noqa: E402

from kernelbench_v3.evaluate.protocol.gate import Driver  # noqa: E402

# Words of the shared host block (bytes), a cache line apart.
DONE_AT, GO_AT, ARMED_AT, HOLD_STAMP_AT, CLIENT_STAMP_AT = 48, 64, 128, 256, 320
BLOCK_BYTES = 4096
HOLD_THREADS = 1024  # two such blocks fill an SM's 2048 thread slots
HOLD_LIMIT_NS = 200 * 10**6  # HOLD gives up after this: a broken variant must not hold the GPU
ARM_LIMIT_S, RING_LIMIT_S = 0.5, 2.0
QUEUE_SETTLE_S = 100e-6  # after the client's launch returns, before GO: its launch reaches the GPU
WATCHER_NS = 20 * 10**6

_HEADER = ".version 7.0\n.target sm_70\n.address_size 64\n\n"

# kbv3_hold(go, armed, counter, flag, stamp, seq, blocks, limit_ns): every thread slot until GO.
HOLD_PTX = (
    _HEADER
    + """.visible .entry kbv3_hold(.param .u64 go, .param .u64 armed, .param .u64 counter,
    .param .u64 flag, .param .u64 stamp, .param .u32 seq, .param .u32 blocks, .param .u64 limit_ns)
{
    .reg .pred %p<6>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<12>;

    ld.param.u64 %rd1, [go];
    ld.param.u64 %rd2, [armed];
    ld.param.u64 %rd3, [counter];
    ld.param.u64 %rd4, [flag];
    ld.param.u64 %rd5, [stamp];
    ld.param.u32 %r1, [seq];
    ld.param.u32 %r2, [blocks];
    ld.param.u64 %rd6, [limit_ns];
    mov.u32 %r3, %tid.x;
    setp.ne.u32 %p1, %r3, 0;
    @%p1 bra JOIN;
    mov.u64 %rd7, %globaltimer;
    atom.add.u32 %r4, [%rd3], 1;
    mov.u32 %r5, %ctaid.x;
    setp.ne.u32 %p2, %r5, 0;
    @%p2 bra FOLLOW;
    mul.lo.u32 %r6, %r2, %r1;
ALL:
    ld.volatile.u32 %r7, [%rd3];
    setp.ge.u32 %p3, %r7, %r6;
    @%p3 bra ARMED;
    mov.u64 %rd8, %globaltimer;
    sub.s64 %rd9, %rd8, %rd7;
    setp.lt.u64 %p4, %rd9, %rd6;
    @%p4 bra ALL;
    bra RELEASE;
ARMED:
    st.volatile.u32 [%rd2], %r1;
    membar.sys;
GO:
    ld.volatile.u32 %r8, [%rd1];
    sub.s32 %r9, %r8, %r1;
    setp.ge.s32 %p5, %r9, 0;
    @%p5 bra OPEN;
    mov.u64 %rd8, %globaltimer;
    sub.s64 %rd9, %rd8, %rd7;
    setp.lt.u64 %p4, %rd9, %rd6;
    @%p4 bra GO;
    bra RELEASE;
OPEN:
    mov.u64 %rd10, %globaltimer;
    st.volatile.u64 [%rd5], %rd10;
RELEASE:
    st.volatile.u32 [%rd4], %r1;
    bra JOIN;
FOLLOW:
    ld.volatile.u32 %r8, [%rd4];
    sub.s32 %r9, %r8, %r1;
    setp.ge.s32 %p5, %r9, 0;
    @%p5 bra JOIN;
    mov.u64 %rd8, %globaltimer;
    sub.s64 %rd9, %rd8, %rd7;
    setp.lt.u64 %p4, %rd9, %rd6;
    @%p4 bra FOLLOW;
JOIN:
    barrier.sync 0;
    ret;
}
\0"""
).encode()

# kbv3_probe_work(stamp, spin_ns, done, seq): its first %globaltimer into `stamp`, then spin
# `spin_ns`, then (if `done` is not 0) DONE = seq behind a system fence, from inside the kernel.
WORK_PTX = (
    _HEADER
    + """.visible .entry kbv3_probe_work(.param .u64 stamp, .param .u64 spin_ns, .param .u64 done,
    .param .u32 seq)
{
    .reg .pred %p<3>;
    .reg .b32 %r<2>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [stamp];
    ld.param.u64 %rd2, [spin_ns];
    ld.param.u64 %rd3, [done];
    ld.param.u32 %r1, [seq];
    mov.u64 %rd4, %globaltimer;
    st.volatile.u64 [%rd1], %rd4;
SPIN:
    mov.u64 %rd5, %globaltimer;
    sub.s64 %rd6, %rd5, %rd4;
    setp.lt.u64 %p1, %rd6, %rd2;
    @%p1 bra SPIN;
    setp.eq.u64 %p2, %rd3, 0;
    @%p2 bra END;
    membar.sys;
    st.volatile.u32 [%rd3], %r1;
    membar.sys;
END:
    ret;
}
\0"""
).encode()

# Client variants: (work, how DONE is written). work: "echo" (no spin, DONE in the kernel),
# "kN" (a raw launch spinning N us), "gN" (the same in a CUDA graph), "add" (a graph of torch's
# add of one element), "front_gN" (a one-thread kernel of the gate's, then the graph: a call
# whose graph starts with copies is still held). DONE: "write" (the stream's write after the
# work, the honest path) or "kernel" (the work's own kernel, the fastest close there is).
HOLD_VARIANTS = (
    "hold_echo",
    "hold_g10_write",
    "hold_k10_write",
    "hold_k10_kernel",
    "hold_g2_write",
    "hold_g50_write",
    "hold_add_write",
    "hold_front_g10_write",
    "hold_echo_again",
)
SHARED_VARIANTS = ("shared_fused", "shared_spin_ladder10", "shared_spin_ladder2", "shared_spin_ladder50")


class Words:
    """The shared host block's words, as this process sees them and (once registered) its GPU."""

    def __init__(self, block: shared_memory.SharedMemory):
        self.u32 = block.buf.cast("I")
        self.u64 = block.buf.cast("Q")
        self.address = ctypes.addressof(ctypes.c_char.from_buffer(block.buf))
        self.device = 0

    def register(self, driver: Driver) -> None:
        self.device = driver.register(self.address, BLOCK_BYTES)

    def at(self, offset: int) -> int:
        return self.device + offset

    def get(self, offset: int) -> int:
        return int(self.u32[offset // 4])

    def set(self, offset: int, value: int) -> None:
        self.u32[offset // 4] = value

    def stamp(self, offset: int) -> int:
        return int(self.u64[offset // 8])

    def release(self) -> None:
        self.u32.release()
        self.u64.release()


def _launch(driver: Driver, function, stream, grid: int, threads: int, *args) -> None:  # noqa: ANN001
    params = (ctypes.c_void_p * len(args))(*(ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args))
    rc = driver._launch(function, grid, 1, 1, threads, 1, 1, 0, ctypes.c_void_p(stream.cuda_stream), params, None)
    driver._check(rc, "cuLaunchKernel")


def _enqueue_work(driver, stream, words, seq: int, spin_us: int, in_kernel_done: bool) -> None:  # noqa: ANN001
    function = driver._kernel(WORK_PTX, b"kbv3_probe_work")
    done = words.at(DONE_AT) if in_kernel_done else 0
    args = (ctypes.c_uint64(words.at(CLIENT_STAMP_AT)), ctypes.c_uint64(spin_us * 1000), ctypes.c_uint64(done))
    _launch(driver, function, stream, 1, 1, *args, ctypes.c_uint32(seq))


def _client_work(variant: str, driver, words, stream):  # noqa: ANN001, ANN202
    """A function of seq that enqueues one call of `variant` on `stream`."""
    import torch

    _, *parts, close = variant.split("_")
    if variant.startswith("hold_echo"):
        return lambda seq: _enqueue_work(driver, stream, words, seq, 0, True)
    work = parts[-1]
    front = parts[0] == "front"
    if work.startswith("k"):
        spin = int(work[1:])

        def call(seq: int) -> None:
            _enqueue_work(driver, stream, words, seq, spin, close == "kernel")
            if close == "write":
                driver.write(stream, words.at(DONE_AT), seq)

        return call
    graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    tiny = torch.zeros(1, device="cuda")

    def body() -> None:
        if work == "add":
            tiny.add_(1)
        else:
            _enqueue_work(driver, side, words, 0, int(work[1:]), False)

    with torch.cuda.stream(side):
        body()
        side.synchronize()
        with torch.cuda.graph(graph, stream=side):
            body()
    graph._kbv3_keep = tiny

    def call_graph(seq: int) -> None:
        with torch.cuda.stream(stream):
            if front:
                _enqueue_work(driver, stream, words, 0, 0, False)
            graph.replay()
            driver.write(stream, words.at(DONE_AT), seq)

    return call_graph


def client(block_name: str, pipe) -> None:  # noqa: ANN001
    """Enqueue calls as the timer asks; errors go back as ("error", text)."""
    try:
        import torch

        driver, stream, watch = Driver(), torch.cuda.Stream(), torch.cuda.Stream()
        block = shared_memory.SharedMemory(name=block_name)
        words = Words(block)
        words.register(driver)
        torch.cuda.synchronize()
        pipe.send("ready")
        call = None
        while True:
            said = pipe.recv()
            if said == "stop":
                break
            verb, arg = said
            if verb == "variant":
                stream.synchronize()
                call = _client_work(arg, driver, words, stream)
                torch.cuda.synchronize()
                pipe.send("ok")
            elif verb == "watch":  # a resident kernel ahead of HOLD
                _enqueue_work(driver, watch, words, 0, WATCHER_NS // 1000, False)
                time.sleep(0.002)
                pipe.send("ok")
            elif verb == "arm":
                call(arg)
                pipe.send("queued")
        torch.cuda.synchronize()
        words.release()
        block.close()
        pipe.send("done")
    except BaseException as exc:  # noqa: BLE001 - reported to the timer, which ends the variant
        pipe.send(("error", f"client: {type(exc).__name__}: {exc}"[:400]))


def _wait_word(words: Words, offset: int, seq: int, limit_s: float) -> float | None:
    """Seconds until the word at `offset` reaches seq, or None after `limit_s`."""
    started = time.perf_counter()
    spins = 0
    while words.get(offset) < seq:
        spins += 1
        if spins % 4096 == 0 and time.perf_counter() - started > limit_s:
            return None
    return time.perf_counter() - started


class Timer:
    """The timer's side: HOLD, the L2 flush, GO, the windows."""

    def __init__(self, words: Words, pipe) -> None:  # noqa: ANN001
        import torch

        self.torch, self.words, self.pipe = torch, words, pipe
        self.hold_stream, self.flush_stream = torch.cuda.Stream(), torch.cuda.Stream()  # the context first
        self.driver = Driver()
        words.register(self.driver)
        self.counter = torch.zeros(2, dtype=torch.int32, device="cuda")  # [arrivals, flag]
        self.l2 = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
        self.blocks = 2 * torch.cuda.get_device_properties(0).multi_processor_count
        self.hold = self.driver._kernel(HOLD_PTX, b"kbv3_hold")
        self.seq = 0

    def launch_hold(self, seq: int) -> None:
        c = self.counter.data_ptr()
        args = (
            ctypes.c_uint64(self.words.at(GO_AT)),
            ctypes.c_uint64(self.words.at(ARMED_AT)),
            ctypes.c_uint64(c),
            ctypes.c_uint64(c + 4),
            ctypes.c_uint64(self.words.at(HOLD_STAMP_AT)),
            ctypes.c_uint32(seq),
            ctypes.c_uint32(self.blocks),
            ctypes.c_uint64(HOLD_LIMIT_NS),
        )
        _launch(self.driver, self.hold, self.hold_stream, self.blocks, HOLD_THREADS, *args)

    def flush(self) -> None:
        with self.torch.cuda.stream(self.flush_stream):
            self.l2.zero_()
        self.flush_stream.synchronize()

    def one_call(self) -> dict:
        self.seq += 1
        seq = self.seq
        self.flush()
        self.launch_hold(seq)
        armed = _wait_word(self.words, ARMED_AT, seq, ARM_LIMIT_S)
        if armed is None:
            self.hold_stream.synchronize()  # HOLD gave up at its limit
            return {"armed": False}
        self.pipe.send(("arm", seq))
        _receive(self.pipe)
        settle = time.perf_counter() + QUEUE_SETTLE_S
        while time.perf_counter() < settle:
            pass
        early = self.words.get(DONE_AT) >= seq
        started = time.perf_counter()
        self.words.set(GO_AT, seq)
        while self.words.get(DONE_AT) < seq:
            if time.perf_counter() - started > RING_LIMIT_S:
                raise TimeoutError(f"call {seq}: no DONE {RING_LIMIT_S:.0f} s after GO")
        window = time.perf_counter() - started
        self.hold_stream.synchronize()
        dispatch = self.words.stamp(CLIENT_STAMP_AT) - self.words.stamp(HOLD_STAMP_AT)
        return {
            "armed": True,
            "window_us": window * 1e6,
            "early": early,
            "dispatch_us": dispatch / 1000,
            "arm_s": armed,
        }

    def watcher(self) -> dict:
        """ms from HOLD's launch to ARMED behind a resident kernel of the client's."""
        self.pipe.send(("watch", 0))
        _receive(self.pipe)
        self.seq += 1
        self.flush()
        self.launch_hold(self.seq)
        armed = _wait_word(self.words, ARMED_AT, self.seq, ARM_LIMIT_S)
        self.words.set(GO_AT, self.seq)  # no call armed: HOLD just lets go
        self.hold_stream.synchronize()
        self.torch.cuda.synchronize()
        return {"ms_to_armed": None if armed is None else round(armed * 1e3, 2)}


def _calls(timer: Timer, calls: int) -> list[dict]:
    done: list[dict] = []
    for _ in range(calls):
        done.append(timer.one_call())
        if sum(1 for c in done if not c["armed"]) >= 3:
            raise RuntimeError(f"HOLD never armed in 3 of {len(done)} calls")
    return done


def _summary(variant: str, calls: list[dict]) -> dict:
    held = [c for c in calls if c.get("armed")]
    us = sorted(c["window_us"] for c in held[len(held) // 10 :])  # the first tenth warms up
    stamped = "_add_" not in variant  # torch's add writes no stamp
    dispatch = sorted(c["dispatch_us"] for c in held) if stamped else []
    out = {
        "variant": variant,
        "calls": len(calls),
        "not_armed": len(calls) - len(held),
        "early": sum(1 for c in held if c["early"]),
    }
    if us:
        out.update(p10_us=round(us[len(us) // 10], 2), p50_us=round(statistics.median(us), 2))
        out.update(p90_us=round(us[9 * len(us) // 10], 2))
    if dispatch:
        out.update(dispatch_min_us=round(dispatch[0], 2), dispatch_p50_us=round(statistics.median(dispatch), 2))
    arm = sorted(c["arm_s"] for c in held)
    if arm:
        out["arm_p50_us"] = round(statistics.median(arm) * 1e6, 1)
    return out


def run_hold(calls: int, out: Path) -> dict[str, dict]:
    block = shared_memory.SharedMemory(create=True, size=BLOCK_BYTES)
    words = Words(block)
    for offset in (DONE_AT, GO_AT, ARMED_AT):
        words.set(offset, 0)
    ctx = mp.get_context("spawn")
    ours, theirs = ctx.Pipe()
    proc = ctx.Process(target=client, args=(block.name, theirs))
    proc.start()
    entries: dict[str, dict] = {}
    try:
        timer = Timer(words, ours)
        _receive(ours)  # ready
        for variant in HOLD_VARIANTS:
            try:
                ours.send(("variant", variant.removesuffix("_again")))
                _receive(ours)
                entry = _summary(variant, _calls(timer, calls))
            except Exception as exc:  # noqa: BLE001 - one broken variant must not end the run
                entry = {"variant": variant, "error": f"{type(exc).__name__}: {exc}"[:400]}
            _journal(out, entries, entry)
            if "never armed" in entry.get("error", ""):
                break  # HOLD cannot fill this GPU: every variant would fail the same way
        try:
            ours.send(("variant", "hold_echo"))
            _receive(ours)
            entry = {"variant": "watcher", "runs": [timer.watcher() for _ in range(3)]}
        except Exception as exc:  # noqa: BLE001
            entry = {"variant": "watcher", "error": f"{type(exc).__name__}: {exc}"[:400]}
        _journal(out, entries, entry)
        ours.send("stop")
        _receive(ours)
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
        words.release()
        block.close()
        block.unlink()
    return entries


def _journal(out: Path, entries: dict[str, dict], entry: dict) -> None:
    entry["at"] = time.strftime("%H:%M:%S")
    entries[entry["variant"]] = entry
    with open(out, "a") as f:
        f.write(json.dumps(entry) + "\n")
    print(json.dumps(entry), flush=True)


def offsets(entries: dict[str, dict]) -> dict:
    """Each rung's median window less its spin and less its mechanism's echo (p50s)."""
    out = {}
    hold_echo = [entries[k]["p50_us"] for k in ("hold_echo", "hold_echo_again") if "p50_us" in entries.get(k, {})]
    echo = statistics.mean(hold_echo) if hold_echo else None
    fused = entries.get("shared_fused", {}).get("p50_us")
    for name, e in entries.items():
        if "p50_us" not in e:
            continue
        rung = next((p for p in name.split("_") if p[1:].isdigit() and p[0] in "kg"), None)
        if name.startswith("hold") and rung and echo is not None:
            out[name] = round(e["p50_us"] - int(rung[1:]) - echo, 2)
        if name.startswith("shared_spin_ladder") and fused is not None:
            out[name] = round(e["p50_us"] - int(name.removeprefix("shared_spin_ladder")) - fused, 2)
    return {"variant": "offsets_us", **out}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--no-shared", action="store_true", help="skip today's gate, for comparison")
    args = parser.parse_args()
    from kernelbench_v3.evaluate import mps

    with mps.daemon(True) as under_mps:
        print(json.dumps({"variant": "mps", "mps": under_mps}), flush=True)
        entries = run_hold(args.calls, args.out)
        if not args.no_shared:
            for variant in SHARED_VARIANTS:
                try:
                    entry = run_variant(variant, args.calls)
                except Exception as exc:  # noqa: BLE001
                    entry = {"variant": variant, "error": f"{type(exc).__name__}: {exc}"[:400]}
                _journal(args.out, entries, entry)
    _journal(args.out, entries, offsets(entries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
