"""Where the gate's slow mode comes from (issue 38). Under MPS on the H200 a gated window reads
either about 9 us or about 16 us, call by call, in a mix that differs from one evaluation to the
next and between the echo and the solution in one evaluation; the null-call ladder then misses
its rungs by up to 1.4 us (benchmarks/results/small_kernels_gpu.md). This takes the evaluator's
parts away one at a time and times the bare gate each way.

A client process (a CUDA context of its own, as the echo and the solution have) enqueues, a batch
at a time and then sleeping on a pipe: wait(GO >= seq) -> one tiny kernel -> write(DONE = seq).
This process, the timer, writes GO and spins on DONE (its window), as `sides._ring_gate` does.

Variants, each CALLS windows:
  alone   nothing else on the GPU
  copy    before each window the timer queues, on a stream of its own, wait(DONE >= seq) and a
          copy of 64 KB behind it (the snapshot's shape under MPS, `timing/snapshot.py`)
  flush   between windows the timer clears the L2 with its own kernel and synchronizes (the prep)
  both    copy and flush, as the evaluator does
  two     two clients, their windows alternating (the echo's, then the solution's), with both
  idle    before each window the timer waits 1.5 ms (as long as the prep), nothing else
  mixed   as two, but the second client's call is a one-program Triton kernel (as most
          solutions' are) where the first's is torch's add (as the echo's is): under the spin the
          evaluator scored every kernel 4.5 us short, the echo's window that much longer than the
          solution's fixed part (docs/timing.md, "The gate's spin")
  spin, spin_both, spin_two, spin_idle, spin_mixed
          the same, the clients holding each call at GO with the gate's spin kernel
          (`protocol.gate.SPIN_PTX`) instead of the stream's wait (under MPS only, but spin and
          spin_idle: without MPS a spinning client starves the timer's flush)
  path_<hold>_<work>_<done>
          one client, the timer flushing and copying at DONE as the evaluator does (as `both`),
          each call held and closed its own way, to price every step of a call's way from GO to
          DONE against the fastest there is. hold: `wait` or `spin`; work: `none`, `torch` (one
          add), `triton` (one program), `graph` (a CUDA graph of the one add, as the evaluator's
          echo and solutions are replayed); done: `write` (the stream's cuStreamWriteValue32) or
          `kernel` (the fused echo's kernel, `protocol.gate.ECHO_PTX`, enqueued after the work:
          GO is open by then, so it writes DONE at once). `path_fused` is the fused echo alone:
          GO read and DONE written by one resident kernel, nothing else (under MPS only)
  edges   no gate: CUDA events around one replay of a graph of 100 of the one add (torch) and of
          100 one-program Triton kernels, per kernel: what a graph over rotating sets pays
          between two calls
Each under a private MPS daemon (as kbv3 starts one) and without. One JSON line per mode and
variant: the window's p10 / p50 / p90 in us and the share of windows over the fastest + 4 us.

    PYTHONPATH=. python3 benchmarks/diagnostics/gate_modes_gpu.py OUT.jsonl [--calls 2000]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import multiprocessing as mp
import statistics
import subprocess
import sys
import time
from multiprocessing import shared_memory
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from kernelbench_v3.evaluate.protocol.gate import GATE_BYTES, Driver, GateWords  # noqa: E402

BATCH = 200  # calls a client enqueues before it sleeps (a stream's queue holds about a thousand)
SLOW_US = 4.0
PATHS = (
    "path_fused",
    "path_spin_none_write",
    "path_spin_torch_write",
    "path_spin_triton_write",
    "path_spin_graph_write",
    "path_spin_graph_kernel",
    "path_spin_triton_kernel",
    "path_wait_none_write",
    "path_wait_graph_write",
    "path_wait_graph_kernel",
)  # the fused echo's question (docs/timing.md, "the fastest release"): first
VARIANTS = PATHS + (
    "edges",
    "spin",
    "spin_mixed",
    "spin_two",
    "alone",
    "mixed",
    "two",
    "copy",
    "flush",
    "both",
    "idle",
    "spin_both",
    "spin_idle",
)  # the spin's first: the last lease's questions
PLAIN_VARIANTS = ("alone", "copy", "flush", "both", "two", "idle", "spin", "spin_idle")
IDLE_S = 1.5e-3
RING_LIMIT_S = 5.0  # a window that never closes ends the variant, not the run
CLIENT_LIMIT_S = 90.0  # a client's start (CUDA, the registration) or its next batch
MODE_LIMIT_S = 600.0


def _address(buf: memoryview) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(buf))


def _triton_bump():  # noqa: ANN202 - a one-program Triton kernel adding 1 to one float
    import triton
    import triton.language as tl

    @triton.jit
    def bump(x_ptr):
        tl.store(x_ptr, tl.load(x_ptr) + 1.0)

    return bump


def _work(kind: str, tiny):  # noqa: ANN001, ANN202 - the call's work, enqueued on the current stream
    import torch

    if kind == "triton":
        bump = _triton_bump()
        bump[(1,)](tiny)  # compiled before any call is armed
        return lambda: bump[(1,)](tiny)
    if kind == "graph":
        graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()
        with torch.cuda.stream(side):
            tiny.add_(1)
            side.synchronize()
            with torch.cuda.graph(graph, stream=side):
                tiny.add_(1)
        return graph.replay
    if kind == "none":
        return lambda: None
    return lambda: tiny.add_(1)


def _enqueue(how: tuple[str, str, str], gate: GateWords, driver: Driver, stream, seq: int, work) -> None:  # noqa: ANN001
    """One call held, worked and closed as `how` = (hold, work, done) says (module docstring)."""
    import torch

    hold, _, done = how
    if hold == "fused":
        gate.enqueue_echo(driver, stream, seq)
        return
    with torch.cuda.stream(stream):
        if hold == "spin":
            driver.spin_geq(stream, gate.go_device, seq)
        else:
            driver.wait_geq(stream, gate.go_device, seq)
        work()
        if done == "kernel":
            driver.echo_call(stream, gate.go_device, gate.done_device, seq)
        else:
            driver.write(stream, gate.done_device, seq)


def client(block_name: str, index: int, calls: int, pipe, how: tuple[str, str, str]) -> None:  # noqa: ANN001
    """Enqueue gated calls a batch at a time; sleep on the pipe between batches. Any failure is
    sent as ("error", text), so the timer says where a variant broke instead of waiting."""
    try:
        import torch

        block = shared_memory.SharedMemory(name=block_name)
        view = block.buf[index * 4096 : index * 4096 + GATE_BYTES]
        driver, stream = Driver(), torch.cuda.Stream()
        gate = GateWords(view)
        gate.register(driver, _address(view))
        tiny = torch.zeros(1, device="cuda")
        call = _work(how[1], tiny)
        torch.cuda.synchronize()
        seq = 1
        while seq <= calls:
            for s in range(seq, min(seq + BATCH, calls + 1)):
                _enqueue(how, gate, driver, stream, s, call)
            seq += BATCH
            pipe.send(seq - 1)  # enqueued up to here
            if pipe.recv() == "stop":
                break
        stream.synchronize()
        pipe.send("done")
    except BaseException as exc:  # noqa: BLE001 - reported to the timer, which ends the variant
        pipe.send(("error", f"client {index}: {type(exc).__name__}: {exc}"[:400]))


def _receive(pipe, index: int) -> int:  # noqa: ANN001
    if not pipe.poll(CLIENT_LIMIT_S):
        raise TimeoutError(f"client {index} said nothing within {CLIENT_LIMIT_S:.0f} s")
    said = pipe.recv()
    if isinstance(said, tuple):
        raise RuntimeError(said[1])
    return said


def _ring(gate: GateWords, seq: int, clock=time.perf_counter) -> float:  # noqa: ANN001
    started = clock()
    gate.go = seq
    spins = 0
    while gate.done < seq:
        spins += 1
        if spins % 65536 == 0 and clock() - started > RING_LIMIT_S:
            raise TimeoutError(f"call {seq}: DONE read {gate.done} {RING_LIMIT_S:.0f} s after GO = {seq}")
    return clock() - started


def path_of(variant: str) -> tuple[str, tuple[str, str, str], list[str]]:
    """(the timer's part as in VARIANTS' bases, each client's (hold, work, done))."""
    if variant.startswith("path_"):
        parts = variant.removeprefix("path_").split("_")
        how = ("fused", "none", "kernel") if parts == ["fused"] else tuple(parts)
        if len(how) != 3:
            raise ValueError(f"{variant}: expected path_<hold>_<work>_<done> or path_fused")
        return "both", how, ["path"]
    hold = "spin" if variant.startswith("spin") else "wait"
    base = variant.removeprefix("spin").removeprefix("_") or "alone"
    works = ["torch", "triton"] if base == "mixed" else ["torch"] * (2 if base == "two" else 1)
    return base, (hold, "torch", "write"), works


def edges() -> dict:
    """CUDA events around one replay of 100 tiny kernels in one graph, per kernel (no gate)."""
    import torch

    tiny = torch.zeros(1, device="cuda")
    bump = _triton_bump()
    out = {"variant": "edges"}
    for name, call in (("torch", lambda: tiny.add_(1)), ("triton", lambda: bump[(1,)](tiny))):
        graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()
        with torch.cuda.stream(side):
            call()
            side.synchronize()
            with torch.cuda.graph(graph, stream=side):
                for _ in range(100):
                    call()
        per = []
        for _ in range(30):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            per.append(start.elapsed_time(end) * 1e3 / 100)
        out[f"{name}_us_per_kernel"] = round(statistics.median(per[5:]), 3)
    return out


def run_variant(variant: str, calls: int) -> dict:
    import torch

    if variant == "edges":
        return edges()
    base, how, works = path_of(variant)
    clients = len(works)
    block = shared_memory.SharedMemory(create=True, size=4096 * clients)
    gates = [GateWords(block.buf[i * 4096 : i * 4096 + GATE_BYTES]) for i in range(clients)]
    for gate in gates:
        gate.go = gate.done = 0
    ctx = mp.get_context("spawn")
    pipes, procs = [], []
    for i in range(clients):
        ours, theirs = ctx.Pipe()
        client_how = how if works[i] == "path" else (how[0], works[i], how[2])
        proc = ctx.Process(target=client, args=(block.name, i, calls, theirs, client_how))
        proc.start()
        pipes.append(ours)
        procs.append(proc)
    copy = base in ("copy", "both", "two", "mixed")
    flush = base in ("flush", "both", "two", "mixed")
    idle = base == "idle"
    driver = Driver()
    side = torch.cuda.Stream()
    src, dst = torch.ones(16384, device="cuda"), torch.empty(16384, device="cuda")
    l2 = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")  # 64 MB: more than the H200's L2
    for i, gate in enumerate(gates if copy else []):  # the timer's own registration, as the snapshot's
        # Only where the copy needs it: the first lease of this script hung in its first variant
        # (alone, under MPS) with no line written; a variant that then hangs only with the
        # registration points at it.
        gate.register(driver, _address(block.buf[i * 4096 : i * 4096 + GATE_BYTES]), fresh=True)
    windows: list[list[float]] = [[] for _ in gates]
    try:
        _ring_all(gates, pipes, windows, calls, copy, flush, idle, (driver, side, src, dst, l2))
    finally:
        for proc in procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
        _close(block, gates)
    out = {"variant": variant, "calls": calls}
    for i, w in enumerate(windows):
        us = sorted(x * 1e6 for x in w[50:])  # the first replays page in and warm up
        out[f"client{i}"] = {
            "p10_us": round(us[len(us) // 10], 2),
            "p50_us": round(statistics.median(us), 2),
            "p90_us": round(us[9 * len(us) // 10], 2),
            "slow_share": round(sum(1 for x in us if x > us[0] + SLOW_US) / len(us), 3),
        }
    return out


def _close(block: shared_memory.SharedMemory, gates: list[GateWords]) -> None:
    """Release the words' views first: a block with views still exported cannot close (the
    H200 lease of 2026-12-03's fourth session lost every variant's windows to that BufferError)."""
    for gate in gates:
        gate.release()
    block.close()
    block.unlink()


def _ring_all(gates, pipes, windows, calls, copy, flush, idle, timer) -> None:  # noqa: ANN001
    import torch

    driver, side, src, dst, l2 = timer
    enqueued = [_receive(p, i) for i, p in enumerate(pipes)]
    for seq in range(1, calls + 1):
        for i, gate in enumerate(gates):
            if seq > enqueued[i]:
                pipes[i].send("more")
                enqueued[i] = _receive(pipes[i], i)
            if flush:
                l2.zero_()
                torch.cuda.synchronize()
            if copy:
                with torch.cuda.stream(side):
                    driver.wait_geq(side, gate.done_device, seq)
                    dst.copy_(src)
            if idle:
                until = time.perf_counter() + IDLE_S
                while time.perf_counter() < until:
                    pass
            windows[i].append(_ring(gate, seq))
            if copy:
                side.synchronize()
    for i, p in enumerate(pipes):
        p.send("stop")
        _receive(p, i)


def one_mode(mode: str, out: Path, calls: int) -> None:
    from kernelbench_v3.evaluate import mps

    with mps.daemon(mode == "mps") as under_mps:
        for variant in VARIANTS if under_mps else PLAIN_VARIANTS:
            try:
                entry = run_variant(variant, calls)
            except Exception as exc:  # noqa: BLE001 - one broken variant must not end the run
                entry = {"variant": variant, "error": f"{type(exc).__name__}: {exc}"[:400]}
            entry.update(mode=mode, mps=under_mps, at=time.strftime("%H:%M:%S"))
            with open(out, "a") as f:
                f.write(json.dumps(entry) + "\n")
            print(json.dumps(entry), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--mode", choices=("mps", "plain"))
    args = parser.parse_args()
    if args.mode:
        one_mode(args.mode, args.out, args.calls)
        return 0
    for mode in ("mps", "plain"):  # each in a process of its own: a context cannot change its daemon
        try:
            subprocess.run(
                [sys.executable, __file__, str(args.out), "--calls", str(args.calls), "--mode", mode],
                check=False,
                timeout=MODE_LIMIT_S,
            )
        except subprocess.TimeoutExpired:
            with open(args.out, "a") as f:
                f.write(json.dumps({"mode": mode, "error": f"the mode ran past {MODE_LIMIT_S:.0f} s"}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
