"""When HOLD's blocks leave, against where the call queued behind them lands (issue 38).

`hold_spread_gpu.py` found a small grid behind HOLD crowded onto some SMs (132 blocks of 128
threads: 80 SMs, 16 blocks on the busiest) with its blocks' starts spread over 13-15 us, though
every block of HOLD is meant to leave at one %globaltimer deadline; an empty kernel of HOLD's
shape ahead of the call spread it exactly. Either HOLD's blocks leave over those microseconds
(a block that reads the release late leaves late), or they leave together and the hardware
places a queued grid's blocks that way. This probe tells them apart: HOLD's own PTX with one
store added at its end (thread 0 of each block writes its SM and %globaltimer as it leaves, into
a buffer passed as HOLD's `sink`, past the word the flush may write), the grid of FMA chains
queued behind it as in the spread probe. Per trial: how far apart HOLD's blocks left, the last
one's lateness past the deadline, and the call's placement; medians over the trials, journaled.

    PYTHONPATH=. python3 benchmarks/diagnostics/hold_exits_gpu.py OUT.jsonl [--trials 20] [--no-mps]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from hold_spread_gpu import RECORD_WORDS, SPREAD_PTX, behind_hold, placement  # noqa: E402

from kernelbench_v3.evaluate import mps  # noqa: E402
from kernelbench_v3.evaluate.protocol.gate import Driver  # noqa: E402
from kernelbench_v3.evaluate.protocol.hold import Hold  # noqa: E402
from kernelbench_v3.evaluate.protocol.hold_kernel import HOLD_PTX  # noqa: E402

EXIT_RECORDS_AT = 64  # bytes into the sink buffer: the flush's sink word stays at 0
DELAYS_NS = (0, 2000)
GRID_THREADS = 128  # the crowded case: one block of 128 threads an SM

_END = "JOIN2:\n    barrier.sync 0;\n    ret;\n"
_RECORDED_END = f"""JOIN2:
    barrier.sync 0;
    @%p1 bra LEFT;
    ld.param.u64 %rd35, [sink];
    mov.u32 %r20, %ctaid.x;
    mul.wide.u32 %rd36, %r20, 16;
    add.u64 %rd35, %rd35, %rd36;
    mov.u32 %r21, %smid;
    cvt.u64.u32 %rd37, %r21;
    mov.u64 %rd38, %globaltimer;
    st.global.u64 [%rd35+{EXIT_RECORDS_AT}], %rd37;
    st.global.u64 [%rd35+{EXIT_RECORDS_AT + 8}], %rd38;
LEFT:
    ret;
"""
assert HOLD_PTX.decode().count(_END) == 1, "HOLD's end changed: update the recorded end"
EXITS_PTX = HOLD_PTX.decode().replace(_END, _RECORDED_END).replace("kbv3_hold(", "kbv3_hold_exits(").encode()


def exit_spread(rows: list[list[int]], exit_at: int) -> dict:
    """How far apart HOLD's blocks left (`rows`: (SM, %globaltimer ns) a block) and the last
    one's lateness past the deadline `exit_at`, in us."""
    times = [t for _, t in rows]
    return {
        "exit_spread_us": (max(times) - min(times)) / 1e3,
        "last_exit_late_us": (max(times) - exit_at) / 1e3,
        "first_exit_late_us": (min(times) - exit_at) / 1e3,
    }


def summary(delay: int, trials: list[dict]) -> dict:
    keys = sorted({k for t in trials for k in t})
    return {
        "variant": "exits",
        "release_delay_ns": delay,
        "trials": len(trials),
        **{f"{k}_median": round(statistics.median(t[k] for t in trials), 3) for k in keys},
        "exit_spread_us_max": round(max(t["exit_spread_us"] for t in trials), 3),
    }


def run(out: Path, trials: int, iters: int) -> None:
    import torch

    torch.zeros(1, device="cuda")  # torch's context current first: the driver loads modules into it
    driver = Driver()
    spread = driver._kernel(SPREAD_PTX, b"kbv3_spread")
    stream = torch.cuda.ExternalStream(driver.create_stream())
    grid = torch.cuda.get_device_properties(0).multi_processor_count
    records = torch.zeros(RECORD_WORDS * grid, dtype=torch.int64, device="cuda")
    scratch = torch.zeros(1 << 16, dtype=torch.uint8, device="cuda")
    src, dst = scratch.data_ptr(), scratch.data_ptr() + (1 << 15)

    def queue() -> None:
        args = ctypes.c_uint64(records.data_ptr()), ctypes.c_uint32(iters)
        driver.launch(spread, stream, grid, GRID_THREADS, *args)

    for delay in DELAYS_NS:
        held = Hold(driver, limit_s=2.0, release_delay_ns=delay)
        held.function = driver._kernel(EXITS_PTX, b"kbv3_hold_exits")  # the driver keeps kernels by name
        held.sink = torch.zeros(EXIT_RECORDS_AT // 8 + 2 * held.blocks, dtype=torch.int64, device="cuda")
        found = []
        try:
            for _ in range(trials):
                exit_at = behind_hold(held, queue, (src, dst))
                exits = held.sink[EXIT_RECORDS_AT // 8 :].view(-1, 2).tolist()
                call = placement(records.view(-1, RECORD_WORDS).cpu(), grid, exit_at)
                found.append({**exit_spread(exits, exit_at), **call})
            entry = summary(delay, found)
        except Exception as exc:  # noqa: BLE001 - one broken variant must not end the probe
            entry = {"variant": "exits", "release_delay_ns": delay, "error": f"{type(exc).__name__}: {exc}"[:400]}
        finally:
            held.close()
        with out.open("a") as f:
            f.write(json.dumps(entry) + "\n")
        print(json.dumps(entry), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--iters", type=int, default=20000)
    parser.add_argument("--no-mps", action="store_true")
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with mps.daemon(not args.no_mps) as under_mps:  # before any CUDA context of this process
        import torch

        head = {"variant": "probe", "mps": under_mps, "gpu": torch.cuda.get_device_name(0)}
        with args.out.open("a") as f:
            f.write(json.dumps(head) + "\n")
        print(json.dumps(head), flush=True)
        run(args.out, args.trials, args.iters)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
