"""Could a gate the solution cannot read close the null-call ladder's +2.6 us (issue 38)?

Today GO and DONE are words of a host block the solution's process maps: its own kernel can read
GO and write DONE (the gate inside its kernel), so the echo must be the fastest release there is
(the fused echo, `protocol.gate.ECHO_PTX`) and every honest call pays the kernel boundaries an
echo has not, about 2.6 us on the H200 (docs/timing.md, "The fused echo").

The event gate moves both words into the timer's own process. The timer holds its own stream
with its spin kernel on a word only it maps, then records an interprocess CUDA event, GO; the
client's stream waits on that event, runs the call's graph and records an event of its own, DONE;
a second stream of the timer's waits on DONE and writes the timer's host word. The client holds
two event handles and nothing it can poll faster than its stream's own wait, so the echo can be
an empty call through the same events, structure for structure.

The DONE-only event gate (`evdone`, issue 38, eleventh session) keeps today's GO (the client's
spin on the shared word) and moves DONE alone: the client's stream records an interprocess event
behind the call, and the timer's stream waits on it and writes the timer's own host word. A
kernel of the client's can then no longer write DONE, so an attacker's call ends the way an
honest one does (a stream's event behind its last kernel), and the echo may be the same shape:
the spin, then the event. If the timer's wait holds, the honest tail (graph end to the stream's
write) cancels against the echo's, instead of standing over the fused echo's in-kernel write.

This times, one client under a private MPS daemon, the timer clearing the L2 between windows as
the evaluator's prep does:
  shared_fused          the fused echo (today's echo)
  shared_spin_<work>    today's solution path: the client's spin on the shared GO, the graph,
                        the stream's write of the shared DONE
  event_<work>          the event gate
  evdone_<work>         the DONE-only event gate (evdone_none is its echo)
work: `none` (no graph), `add` (a graph of one tiny add), `ladderN` (a graph of one kernel that
spins N us on %globaltimer: the ladder's known duration). One JSON line per variant (window p10 /
p50 / p90 in us), then the offsets: ladder window - N - the echo's window, per mechanism.

    PYTHONPATH=. python3 benchmarks/diagnostics/event_gate_gpu.py OUT.jsonl [--calls 500]
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

from kernelbench_v3.evaluate.protocol.gate import GATE_BYTES, Driver, GateWords, private_block  # noqa: E402

BATCH = 100  # calls armed at a time: one interprocess event per call in flight, each way
VARIANTS = (
    "shared_fused",
    "evdone_none",
    "evdone_ladder2",
    "evdone_ladder10",
    "evdone_ladder50",
    "event_none",
    "shared_spin_ladder10",
    "event_ladder10",
    "shared_spin_add",
    "event_add",
    "shared_spin_ladder2",
    "event_ladder2",
    "shared_spin_ladder50",
    "event_ladder50",
)
RING_LIMIT_S = 2.0
# The timer's own spins end after this: a variant that breaks mid-batch must not leave a hundred
# spins of the gate's 10 s limit queued ahead of the next variant's work (a lease lost 9 minutes).
HOLD_LIMIT_NS = 200 * 10**6
CLIENT_LIMIT_S = 90.0


def _address(buf: memoryview) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(buf))


def _work(kind: str, driver: Driver):  # noqa: ANN202 - a graph's replay, or nothing
    """The call's work as a replayable CUDA graph (`add`, `ladderN`), or None for `none`."""
    import torch

    if kind in ("none", "fused"):  # the fused echo is a kernel of the gate's, not a graph
        return None
    tiny = torch.zeros(1, device="cuda")
    zero_page, zero_view, zero_address = private_block()  # word 0 stays 0: the spin runs its limit
    zero_device = driver.register(zero_address, GATE_BYTES)
    graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()

    def body() -> None:
        if kind == "add":
            tiny.add_(1)
        else:
            spin_ns = int(kind.removeprefix("ladder")) * 1000
            driver.spin_geq(side, zero_device, 1, limit_ns=spin_ns)

    with torch.cuda.stream(side):
        body()
        side.synchronize()
        with torch.cuda.graph(graph, stream=side):
            body()
    graph._kbv3_keep = (zero_page, zero_view, tiny)  # the graph reads these for as long as it lives
    return graph.replay


def client(block_name: str, variant: str, calls: int, pipe) -> None:  # noqa: ANN001
    """Arm calls a batch at a time, as the timer asks; errors go back as ("error", text)."""
    try:
        import torch

        driver, stream = Driver(), torch.cuda.Stream()
        mechanism, *rest = variant.split("_")
        work = _work(rest[-1], driver)
        gate, events = None, {}
        if mechanism in ("shared", "evdone"):
            block = shared_memory.SharedMemory(name=block_name)
            gate = GateWords(block.buf[:GATE_BYTES])
            gate.register(driver, _address(block.buf[:GATE_BYTES]))
        if mechanism == "evdone":
            done = [torch.cuda.Event(interprocess=True) for _ in range(BATCH)]
            for ev in done:
                ev.record(stream)
            stream.synchronize()
            pipe.send([ev.ipc_handle() for ev in done])
            events = {"done": done}
        elif mechanism == "event":
            go_handles = pipe.recv()
            go = [torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(), h) for h in go_handles]
            done = [torch.cuda.Event(interprocess=True) for _ in range(BATCH)]
            for ev in done:
                ev.record(stream)
            stream.synchronize()
            pipe.send([ev.ipc_handle() for ev in done])
            events = {"go": go, "done": done}
        torch.cuda.synchronize()
        pipe.send("ready")
        while True:
            said = pipe.recv()
            if said == "stop":
                break
            first, last = said
            for seq in range(first, last + 1):
                _arm(variant, seq, driver, stream, work, gate, events)
            pipe.send("armed")
        stream.synchronize()
        pipe.send("done")
    except BaseException as exc:  # noqa: BLE001 - reported to the timer, which ends the variant
        pipe.send(("error", f"client: {type(exc).__name__}: {exc}"[:400]))


def _arm(variant, seq, driver, stream, work, gate, events) -> None:  # noqa: ANN001
    """One call enqueued as `variant` holds and closes it (module docstring)."""
    import torch

    with torch.cuda.stream(stream):
        if variant == "shared_fused":
            gate.enqueue_echo(driver, stream, seq)
        elif variant.startswith("evdone"):
            driver.spin_geq(stream, gate.go_device, seq)
            if work is not None:
                work()
            events["done"][seq % BATCH].record(stream)
        elif gate is not None:
            driver.spin_geq(stream, gate.go_device, seq)
            work()
            driver.write(stream, gate.done_device, seq)
        else:
            stream.wait_event(events["go"][seq % BATCH])
            if work is not None:
                work()
            events["done"][seq % BATCH].record(stream)


def _receive(pipe):  # noqa: ANN001, ANN202
    if not pipe.poll(CLIENT_LIMIT_S):
        raise TimeoutError(f"the client said nothing within {CLIENT_LIMIT_S:.0f} s")
    said = pipe.recv()
    if isinstance(said, tuple) and said and said[0] == "error":
        raise RuntimeError(said[1])
    return said


def _ring(opener: GateWords, seq: int, closer: GateWords) -> float:
    """GO = seq on `opener`, then the seconds until DONE >= seq on `closer`."""
    started = time.perf_counter()
    opener.go = seq
    spins = 0
    while closer.done < seq:
        spins += 1
        if spins % 65536 == 0 and time.perf_counter() - started > RING_LIMIT_S:
            raise TimeoutError(f"call {seq}: DONE read {closer.done} {RING_LIMIT_S:.0f} s after GO")
    return time.perf_counter() - started


def run_variant(variant: str, calls: int) -> dict:
    import torch

    event = variant.startswith("event")
    evdone = variant.startswith("evdone")
    block = shared_memory.SharedMemory(create=True, size=4096)
    shared = GateWords(block.buf[:GATE_BYTES])
    shared.go = shared.done = 0
    page, view, address = private_block()  # the event gate's words: this process's alone
    own = GateWords(view)
    own.go = own.done = 0
    driver = Driver()
    if event or evdone:
        own.register(driver, address)
    hold, close, flush = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()
    l2 = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    ctx = mp.get_context("spawn")
    ours, theirs = ctx.Pipe()
    proc = ctx.Process(target=client, args=(block.name, variant, calls, theirs))
    proc.start()
    windows: list[float] = []
    try:
        if event:
            go = [torch.cuda.Event(interprocess=True) for _ in range(BATCH)]
            for ev in go:
                ev.record(hold)
            hold.synchronize()
            ours.send([ev.ipc_handle() for ev in go])
            done = [torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(), h) for h in _receive(ours)]
        if evdone:
            done = [torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(), h) for h in _receive(ours)]
        _receive(ours)  # ready
        opener = own if event else shared  # where GO is written
        closer = own if (event or evdone) else shared  # where DONE is read
        for first in range(1, calls + 1, BATCH):
            last = min(first + BATCH - 1, calls)
            if event:
                for seq in range(first, last + 1):
                    driver.spin_geq(hold, own.go_device, seq, limit_ns=HOLD_LIMIT_NS)
                    go[seq % BATCH].record(hold)
            ours.send((first, last))
            _receive(ours)  # armed
            if event or evdone:
                for seq in range(first, last + 1):
                    close.wait_event(done[seq % BATCH])
                    driver.write(close, own.done_device, seq)
            for seq in range(first, last + 1):
                with torch.cuda.stream(flush):
                    l2.zero_()
                flush.synchronize()
                windows.append(_ring(opener, seq, closer))
        ours.send("stop")
        _receive(ours)
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
        shared.release()
        own.release()
        block.close()
        block.unlink()
        del view, page
    us = sorted(x * 1e6 for x in windows[50:])
    return {
        "variant": variant,
        "calls": calls,
        "p10_us": round(us[len(us) // 10], 2),
        "p50_us": round(statistics.median(us), 2),
        "p90_us": round(us[9 * len(us) // 10], 2),
    }


def offsets(entries: dict[str, dict]) -> dict:
    """Each ladder rung's median window less its duration and less its mechanism's echo."""
    echo = {
        "shared": entries.get("shared_fused"),
        "event": entries.get("event_none"),
        "evdone": entries.get("evdone_none"),
    }
    out = {}
    for name, e in entries.items():
        mechanism, *rest = name.split("_")
        rung = rest[-1]
        if rung.startswith("ladder") and echo.get(mechanism) and "p50_us" in e and "p50_us" in echo[mechanism]:
            spin_us = int(rung.removeprefix("ladder"))
            out[name] = round(e["p50_us"] - spin_us - echo[mechanism]["p50_us"], 2)
    return {"variant": "offsets_us", **out}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, in this order")
    args = parser.parse_args()
    from kernelbench_v3.evaluate import mps

    entries: dict[str, dict] = {}
    with mps.daemon(True) as under_mps:
        for variant in args.variants.split(","):
            try:
                entry = run_variant(variant, args.calls)
            except Exception as exc:  # noqa: BLE001 - one broken variant must not end the run
                entry = {"variant": variant, "error": f"{type(exc).__name__}: {exc}"[:400]}
            entry.update(mps=under_mps, at=time.strftime("%H:%M:%S"))
            entries[variant] = entry
            with open(args.out, "a") as f:
                f.write(json.dumps(entry) + "\n")
            print(json.dumps(entry), flush=True)
    with open(args.out, "a") as f:
        f.write(json.dumps(offsets(entries)) + "\n")
    print(json.dumps(offsets(entries)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
