"""The graph gates in one process, before any evaluator runs them: does each build, launch, write
DONE only after the call's output is complete, and what is its window from GO to DONE?

PYTHONPATH=. python3 benchmarks/diagnostics/graph_gate_gpu.py OUT.jsonl [--calls N]

For three forwards (two elementwise kernels; a cuBLAS GEMM, whose captured kernels may carry
programmatic edges of their own; a one-kernel reduction) and every way to hold a call (the spin
kernel ahead of the graph, and each of `protocol/gate_graph.GRAPH_GATES`), N gated calls one at
a time: the host writes GO, spins until DONE, and then checks the output as it stands against
the forward's eager result. The fused echo's window is measured the same way; each line of
OUT.jsonl holds one (forward, way) with its p10 / p50 / p90 windows and its wrong outputs.
No MPS, no second process: the evaluator's windows differ, the shapes and the order do not.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def _forwards(torch):
    x = torch.randn(1 << 20, device="cuda")
    a, b = torch.randn(1024, 1024, device="cuda"), torch.randn(1024, 1024, device="cuda")
    r = torch.randn(4096, 1024, device="cuda")
    return {
        "gelu_plus_one": lambda: torch.nn.functional.gelu(x) + 1,
        "gemm_1024": lambda: a @ b,
        "row_sum": lambda: r.sum(dim=1),
    }


def _windows(torch, gate, driver, stream, arm, calls: int, output, expected) -> dict:
    seq, windows, wrong = gate.done, [], 0
    for _ in range(calls):
        seq += 1
        if output is not None:
            output.zero_()
        torch.cuda.synchronize()
        arm(seq)
        time.sleep(0.0002)  # the GPU reaches the hold before GO, as in the evaluator
        started = time.perf_counter()
        gate.go = seq
        while gate.done < seq:
            if time.perf_counter() - started > 2.0:
                raise TimeoutError(f"call {seq} never wrote DONE within 2 s")
        windows.append((time.perf_counter() - started) * 1e6)
        if output is not None and not torch.equal(output, expected):
            wrong += 1  # read as it stood at DONE: the host copies after DONE, nothing waits
        stream.synchronize()
    w = sorted(windows[5:])
    q = lambda f: round(w[int(f * (len(w) - 1))], 2)  # noqa: E731
    return {"p10_us": q(0.1), "p50_us": round(statistics.median(w), 2), "p90_us": q(0.9), "wrong": wrong}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    import torch

    from kernelbench_v3.evaluate.protocol.gate import Driver, GateWords, private_block
    from kernelbench_v3.evaluate.protocol.gate_graph import GRAPH_GATES

    driver, stream = Driver(), torch.cuda.Stream()
    _page, view, address = private_block()
    gate = GateWords(view)
    gate.register(driver, address, fresh=True)
    gate.go = gate.done = 0
    out = args.out.open("a")

    def write(entry: dict) -> None:
        entry["at"] = time.strftime("%H:%M:%S")
        out.write(json.dumps(entry) + "\n")
        out.flush()
        print(json.dumps(entry), flush=True)

    def echo(seq: int) -> None:
        gate.target = seq
        gate.enqueue_echo(driver, stream, seq)

    write({"forward": "-", "way": "fused_echo", **_windows(torch, gate, driver, stream, echo, args.calls, None, None)})
    for name, forward in _forwards(torch).items():
        expected = forward().clone()
        graph = torch.cuda.CUDAGraph(keep_graph=True)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            forward()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph):
            output = forward()
        graph.instantiate()
        torch.cuda.synchronize()

        def spin(seq: int, graph=graph) -> None:
            gate.enqueue(driver, stream, seq, graph.replay, spin=True)

        ways = {"spin": spin}
        for kind, shape in GRAPH_GATES.items():
            try:
                exe = driver.gated_graph(
                    graph.raw_cuda_graph(), gate.go_device, gate.target_device, kind=kind, done=gate.done_device
                )
            except Exception as exc:  # noqa: BLE001
                write({"forward": name, "way": kind, "error": f"{type(exc).__name__}: {exc}"[:300]})
                continue

            def gated(seq: int, exe=exe, shape=shape) -> None:
                gate.target = seq
                gate.enqueue_gated_graph(driver, stream, seq, exe, done_in_graph=shape.done_in_graph)

            ways[kind] = gated
        for way, arm in ways.items():
            try:
                write(
                    {
                        "forward": name,
                        "way": way,
                        **_windows(torch, gate, driver, stream, arm, args.calls, output, expected),
                    }
                )
            except Exception as exc:  # noqa: BLE001
                write({"forward": name, "way": way, "error": f"{type(exc).__name__}: {exc}"[:300]})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
