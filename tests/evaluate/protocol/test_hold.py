"""The occupancy gate (`protocol.hold`) on a machine without a GPU: HOLD's PTX assembles for
every GPU of the benchmark, its steps come in the order the design needs, the host drives the
words in order against a stand-in for the device, and the timer's turns (`held`, `measure`) go
HOLD, arm, prepare, ring. The GPU figures are in benchmarks/results/occupancy_gate_gpu.md."""

from __future__ import annotations

import random
import subprocess
import threading
import time

import pytest
import torch

from kernelbench_v3.evaluate.protocol import gate, hold, hold_kernel
from kernelbench_v3.evaluate.protocol.gate_kernels import DONE_NOW_PTX
from kernelbench_v3.evaluate.supervisor.timing.measure import Feed, measure
from kernelbench_v3.evaluate.supervisor.timing.stats import CallPlan
from tests.evaluate.protocol.test_gate import _ptxas


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_90"])
@pytest.mark.parametrize("ptx, entry", [(hold.HOLD_PTX, b"kbv3_hold"), (DONE_NOW_PTX, b"kbv3_done_now")])
def test_the_hold_kernels_are_valid_ptx_for_every_gpu_of_the_benchmark(arch, ptx, entry, tmp_path):
    ptxas = _ptxas()
    if ptxas is None:
        pytest.skip("no ptxas on this machine")
    source = tmp_path / "hold.ptx"
    source.write_bytes(ptx.rstrip(b"\0"))
    done = subprocess.run(
        [ptxas, f"-arch={arch}", "-v", str(source), "-o", str(tmp_path / "h.cubin")], capture_output=True
    )
    assert done.returncode == 0, done.stderr.decode()
    assert ptx.endswith(b"\0") and b".entry " + entry + b"(" in ptx
    if entry == b"kbv3_hold":  # two blocks of 1024 threads must fit an SM's 64K registers
        used = int(done.stderr.decode().split("Used ")[1].split(" registers")[0])
        assert used <= 32


def test_hold_takes_exactly_every_thread_slot():
    assert hold.hold_shape(2048) == (1024, 2)  # Hopper, the A100
    assert hold.hold_shape(1536) == (768, 2)  # the RTX 3090
    assert hold.hold_shape(1024) == (1024, 1)
    with pytest.raises(gate.GateUnavailable):
        hold.hold_shape(2050)
    assert hold.hold_shape(2048, block_threads=64) == (64, 32)  # every block slot of an H100 SM too
    assert hold.hold_shape(1536, block_threads=256) == (256, 6)
    with pytest.raises(gate.GateUnavailable):
        hold.hold_shape(1536, block_threads=1000)
    assert hold.launch_args_count() == 14


def test_holds_block_size_is_named_by_the_environment_or_left_to_the_fewest_blocks(monkeypatch):
    monkeypatch.delenv(hold.HOLD_THREADS_ENV, raising=False)
    assert hold.hold_block_threads() is None
    monkeypatch.setenv(hold.HOLD_THREADS_ENV, "128")
    assert hold.hold_block_threads() == 128
    for bad in ("100", "0", "2048", "many"):
        monkeypatch.setenv(hold.HOLD_THREADS_ENV, bad)
        with pytest.raises(ValueError, match="KBV3_HOLD_THREADS"):
            hold.hold_block_threads()


def test_holds_steps_come_in_the_order_that_makes_it_a_gate():
    body = hold.HOLD_PTX.decode()
    arrive = body.index("atom.add.u32 %r10, [%rd14], 1")
    armed = body.index("st.volatile.u32 [%rd11], %r1")  # ARMED
    copy = body.index("COPY:")
    prepped = body.index("st.volatile.u32 [%rd13], %r1")  # PREPPED
    go = body.index("GOWAIT:")
    release = body.index("st.volatile.u32 [%rd17], %r1")  # every block may go
    # ARMED only once every block has arrived; the inputs only after ARMED (and PREP); GO read
    # only after the prep is done by every block; the blocks let go only after GO (or a limit).
    assert arrive < body.index("ALL:") < armed < body.index("PREPWAIT:") < copy < prepped < go < release
    assert body.index("FLUSH:") > copy and body.index("DIRTY:") > body.index("FLUSH:")
    assert body.count("barrier.sync 0") == 3  # arrive, prep, release: every thread waits its block
    assert "%globaltimer" in body and body.count("bra GIVEUP") >= 2  # bounded: it always ends
    # The blocks leave together: block 0 writes the deadline before the release, a follower reads
    # it only after the release (a fence between), and every block waits for it, bounded.
    deadline = body.index("st.volatile.u64 [%rd18], %rd26")
    assert deadline < release < body.index("FOLLOWED:") < body.index("ld.volatile.u64 %rd26, [%rd18]")
    assert "membar.gl;\n    st.volatile.u32 [%rd17]" in body and "FOLLOWED:\n    membar.gl;" in body
    exit_wait = body[body.index("EXITWAIT:") : body.index("JOIN2:")]
    assert "%globaltimer" in exit_wait and "setp.ge.u64 %p4, %rd4, %rd26" in exit_wait and "%rd28" in exit_wait
    assert hold_kernel.EXIT_AT % 8 == 0 and hold_kernel.EXIT_AT + 8 <= hold.COUNTER_WORDS * 4
    # GO, ARMED, PREP and PREPPED are words of the timer's page, a cache line apart
    offsets = [hold.GO_AT, hold.ARMED_AT, hold.PREP_AT, hold.PREPPED_AT]
    assert all(b - a >= 64 for a, b in zip(offsets, offsets[1:])) and offsets[-1] + 4 <= hold.WORDS_BYTES


class _Ptr:
    def __init__(self, address):
        self.address = address

    def data_ptr(self):
        return self.address


class _Stream:
    cuda_stream = 77

    def query(self):
        return True


class _Device:
    """Stands in for the driver and for HOLD on the GPU: each launch arms at once (unless told
    not to), writes PREPPED once PREP reaches its seq, and ends at GO."""

    def __init__(self, arms=True):
        self.arms, self.launches, self.threads = arms, [], []

    def _launch(self, function, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        import ctypes

        values = [ctypes.cast(params[i], ctypes.POINTER(ctypes.c_uint64)).contents.value for i in range(10)]
        seq = ctypes.cast(params[10], ctypes.POINTER(ctypes.c_uint32)).contents.value
        delay = ctypes.cast(params[13], ctypes.POINTER(ctypes.c_uint64)).contents.value
        self.launches.append({"grid": gx, "block": bx, "values": values, "seq": seq, "release_delay_ns": delay})
        if self.arms:
            self.held._set(hold.ARMED_AT, seq)
            t = threading.Thread(target=self._run, args=(seq,), daemon=True)
            t.start()
            self.threads.append(t)
        return 0

    def _run(self, seq):
        # Polls politely and ends at GO, as HOLD does: a thread spinning on the GIL for the rest
        # of the session once slowed every later test thirtyfold.
        while self.held._word(hold.PREP_AT) < seq:
            if self.held._word(hold.GO_AT) >= seq:
                return
            time.sleep(0.0005)
        self.held._set(hold.PREPPED_AT, seq)

    def join(self):
        for t in self.threads:
            t.join(5)
            assert not t.is_alive(), "a stand-in HOLD never saw PREP or GO"

    @staticmethod
    def _check(rc, what):
        assert rc == 0, what

    launch = gate.Driver.launch  # the real packing, over this stand-in's `_launch`

    def unregister(self, address):
        pass


def _hold(device, clock=None):
    import time

    held = hold.Hold.__new__(hold.Hold)
    held.driver, held.clock, held.limit_ns = device, clock or time.perf_counter, 10**9
    held.release_delay_ns = hold.RELEASE_DELAY_NS
    held.threads, held.blocks = 1024, 264
    held._page, held._view, held._address = gate.private_block()
    held._words = held._view[: hold.WORDS_BYTES].cast("I")
    held.words_device, held.counters, held.sink = 0x1000, _Ptr(0x2000), _Ptr(0x3000)
    held.stream, held.function, held.seq = _Stream(), object(), 0
    device.held = held
    return held


def test_the_host_drives_hold_take_prepare_go_in_order():
    device = _Device()
    held = _hold(device)
    assert held.take(0xA000, 0xB000, 4096, (0xC000, 1 << 20), (0xD000, 64)) >= 0
    launch = device.launches[0]
    assert launch["grid"] == 264 and launch["block"] == 1024 and launch["seq"] == 1
    # words, counters, src, dst, 16-byte vectors to copy, flush, its vectors, dirty, its vectors, sink
    assert launch["values"] == [0x1000, 0x2000, 0xA000, 0xB000, 256, 0xC000, 65536, 0xD000, 4, 0x3000]
    assert launch["release_delay_ns"] == hold.RELEASE_DELAY_NS > 0  # every block leaves at one deadline
    assert held._word(hold.GO_AT) == 0  # HOLD holds until GO
    assert held.prepare() >= 0 and held._word(hold.PREPPED_AT) == 1
    held.go()
    assert held._word(hold.GO_AT) == 1
    held.take(0xA000, 0xB000, 4096, (0xC000, 16), (0xD000, 16))
    assert device.launches[1]["seq"] == 2  # one launch, one seq, per window
    held.go()
    device.join()


def test_a_hold_that_cannot_take_every_sm_is_refused_and_let_go():
    ticks = iter(range(10**6))
    held = _hold(_Device(arms=False), clock=lambda: float(next(ticks)))
    with pytest.raises(hold.HoldRefused, match="could not take every SM"):
        held.take(0, 0, 0, (0, 0), (0, 0))
    assert held._word(hold.PREP_AT) == held._word(hold.GO_AT) == 1  # released: every phase passes


class _Caller:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def arm(self, s):
        self.log.append(f"{self.name}.arm({s})")
        return 0.0

    def ring(self):
        self.log.append(f"{self.name}.ring")
        return 1e-5

    def unblock(self):
        self.log.append(f"{self.name}.unblock")


class _Turns:
    def __init__(self, log, refuse_at=None):
        self.log, self.refuse_at, self.turns = log, refuse_at, 0

    def turn(self, caller, s, echo):
        self.turns += 1
        if self.turns == self.refuse_at:
            raise hold.HoldRefused("a kernel of another process was resident")
        self.log.append(f"hold.take({'echo' if echo else s})")
        caller.arm(s)
        self.log.append("hold.prepare")
        return 0.0, 1e-4

    def release(self):
        self.log.append("hold.release")


class _Work:
    cuda = False
    flush_gpu_s = None  # no events on the CPU

    def __init__(self, log):
        self.log = log

    def sync(self):
        self.log.append("sync")

    def flush(self):
        self.log.append("flush")

    def timed_flush(self, clock=None):
        return 0.0


def _feed(log):
    return Feed(
        sets=2,
        draw=lambda: [torch.zeros(1)],
        write=lambda s, inputs: log.append(f"write({s})"),
        decoy=lambda inputs: log.append("stage"),
    )


def _measure_held(log, calls, turns):
    ticks = iter(range(10**6))
    plan = CallPlan(min_calls=calls, max_calls=calls, target_rel=0.0, cap_s=1e9)
    solution, echo = _Caller(log, "solution"), _Caller(log, "echo")
    clock = lambda: float(next(ticks)) * 1e-6  # noqa: E731
    return measure(solution, echo, _feed(log), _Work(log), plan, random.Random(0), clock=clock, held=turns)


def test_measure_under_a_hold_stages_the_inputs_then_holds_arms_prepares_and_rings_each_side():
    log = []
    _measure_held(log, calls=3, turns=_Turns(log))
    first = log[: log.index("solution.ring") + 1]
    s = int(first[first.index("hold.take(echo)") + 4].split("(")[1].rstrip(")"))
    assert first == [
        "stage",
        "sync",
        "hold.take(echo)",
        "echo.arm(0)",
        "hold.prepare",
        "echo.ring",
        f"hold.take({s})",
        f"solution.arm({s})",
        "hold.prepare",
        "solution.ring",
    ]
    assert not any(e.startswith("write") or e == "flush" for e in log)  # HOLD writes and flushes
    assert log[-1] == "hold.release"  # never left holding the GPU


def test_a_hold_refused_mid_timing_stops_it_as_a_busy_gpu_and_lets_go():
    log = []
    calls = _measure_held(log, calls=50, turns=_Turns(log, refuse_at=10))
    assert "could not" not in calls.busy and "resident" in calls.busy
    assert log[-1] == "hold.release" and len(calls.nets) < 50


def test_the_hold_gate_is_chosen_only_under_mps_and_brings_the_held_echo(monkeypatch):
    monkeypatch.setenv(gate.GATE_ENV, "hold")
    assert gate.gate_kind(True) == "hold" and gate.echo_kind(True) == "held"
    assert gate.gate_kind(False) == "wait" and gate.echo_kind(False) == "graph"  # time-sliced: nothing to hold
    monkeypatch.setenv(gate.MPS_SHARE_ENV, "50")  # a client capped to half the SMs cannot hold them all
    monkeypatch.setattr(gate, "_device_capability", lambda: (9, 0))
    assert gate.gate_kind(True) == "pdl-go" and gate.echo_kind(True) == "fused"  # the default instead
    monkeypatch.setenv(gate.GATE_ENV, "bogus")
    with pytest.raises(ValueError, match="'hold'"):
        gate.gate_kind(True)


class _RecordingHold:
    def __init__(self):
        self.taken = []

    def take(self, src, dst, nbytes, flush, dirty):
        self.taken.append((src, dst, nbytes, flush, dirty))
        return 0.0

    def prepare(self):
        return 1e-4


class _FlushRanges:
    def flush_ranges(self):
        return (1, 2), (3, 4)


def test_each_turn_copies_the_stages_inputs_onto_exactly_the_set_that_call_reads():
    from kernelbench_v3.evaluate.supervisor.timing.held import HeldTurns
    from kernelbench_v3.evaluate.supervisor.timing.memory import TimedMemory, set_bytes

    template = [torch.ones(3, 5), 7, torch.ones(11, dtype=torch.int64)]  # two tensors and a scalar
    out_nbytes = 4 * 9
    region = torch.zeros(4 * set_bytes(template, out_nbytes), dtype=torch.uint8)
    memory = TimedMemory(region, template, (9,), torch.float32, 4)
    stage_region = torch.zeros(set_bytes(template, out_nbytes), dtype=torch.uint8)
    stage = TimedMemory(stage_region, template, (9,), torch.float32, 1)
    recorder = _RecordingHold()
    turns = HeldTurns(stage, memory, _FlushRanges(), hold=recorder)
    log = []
    for s in range(4):
        turns.turn(_Caller(log, "solution"), s, echo=False)
    turns.turn(_Caller(log, "echo"), 0, echo=True)
    for s, (src, dst, nbytes, flush, dirty) in enumerate(recorder.taken[:4]):
        first, last = memory.sets[s][0], memory.sets[s][2]
        assert src == stage.sets[0][0].data_ptr() and dst == first.data_ptr()  # the set's first input...
        assert dst + nbytes >= last.data_ptr() + last.numel() * last.element_size()  # ...to its last
        assert dst + nbytes <= memory.slots[s].data_ptr()  # and never into the output slot
        assert nbytes % 16 == 0 and (flush, dirty) == ((1, 2), (3, 4))
    src, dst, nbytes, _, _ = recorder.taken[4]
    assert (
        dst == turns.echo_target.data_ptr() and turns.echo_target.numel() >= nbytes
    )  # the echo's: the timer's own bytes
    # each side armed before HOLD writes its inputs, its stream's wait opened only after
    assert log == [e for s in range(4) for e in (f"solution.arm({s})", "solution.unblock")] + [
        "echo.arm(0)",
        "echo.unblock",
    ]


def test_a_hold_that_has_not_ended_keeps_its_words_registered_when_closed(monkeypatch):
    class _Busy(_Stream):
        def query(self):
            return False  # blocks kept out by another process's kernel have not run yet

    unregistered = []
    device = _Device()
    device.unregister = unregistered.append
    held = _hold(device)
    held.stream = _Busy()
    monkeypatch.setattr(hold, "SYNC_LIMIT_S", 0.01)
    assert held.close() is False and unregistered == [] and held in hold._STILL_RUNNING
    assert held._word(hold.GO_AT) == held._word(hold.PREP_AT) == held.seq  # still let go
    hold._STILL_RUNNING.remove(held)
    held.stream = _Stream()
    assert held.close() is True and unregistered == [held._address]
