"""Where a held call's blocks land when HOLD lets go, and what that costs (issue 38).

The seventh lease ran the evaluator under the occupancy gate (`KBV3_GATE=hold`): the null-call
ladder read +0.9 to +1.1 us over its rotating figures, but small grids were scored two to
three times their time (the persistent GELU, one program per SM, at exactly 2.0x; the honest
sum, 256 blocks of 128 threads, at 2.4x), while kernels of many blocks were right. The
hypothesis: a block of the queued call starts wherever an SM has room, so the first SMs that
HOLD's blocks leave take as many of a small grid's blocks as fit, and the rest stay idle.

This probe measures that directly, in one process (a second stream's kernel is queued behind
HOLD as another MPS client's is: blocks start where an SM has room): SPREAD, a grid whose
blocks each run a fixed chain of FMAs and record their SM and %globaltimer start and end, is
launched on an idle GPU and behind `protocol.hold.Hold` with each release delay (0: each of
HOLD's blocks leaves as it reads the release, the sixth lease's HOLD; otherwise all at one
deadline that long after GO), and behind HOLD (delay 0) with an empty kernel of HOLD's shape
queued ahead of it on its stream (`absorb`: the empty blocks take the SMs as HOLD frees them,
and SPREAD starts only once they have all ended, as on an idle GPU; the fallback if no delay
helps, at the cost of one kernel boundary). Per variant, over TRIALS launches: distinct SMs, the
most blocks on one SM, the span (last end less first start) and the spread of the starts.

    PYTHONPATH=. python3 benchmarks/diagnostics/hold_spread_gpu.py OUT.jsonl [--trials 20] [--no-mps]
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from kernelbench_v3.evaluate import mps  # noqa: E402
from kernelbench_v3.evaluate.protocol.gate import Driver  # noqa: E402
from kernelbench_v3.evaluate.protocol.hold import RELEASE_DELAY_NS, Hold  # noqa: E402
from kernelbench_v3.evaluate.protocol.hold_kernel import EXIT_AT  # noqa: E402

RECORD_WORDS = 4  # int64 per block (32 bytes, SPREAD's stride): SM, start ns, end ns, the chain's value
QUEUE_SETTLE_S = 100e-6  # after the launch returns, before PREP: the launch reaches the GPU
DELAYS_NS = (0, 500, 2000, 5000)
SHAPES = ((128, 1), (256, 1), (256, 2), (1024, 1))  # (threads, grid in SMs)
# HOLD in smaller blocks (at the default delay, and the smallest also at delay 0): each block that
# leaves frees room for fewer of the call's blocks, so no SM that frees first can take many.
HOLD_BLOCK_THREADS = (512, 256, 128, 64)

# kbv3_spread(out, iters): every thread runs `iters` dependent FMAs; thread 0 records its block.
SPREAD_PTX = b""".version 7.0
.target sm_70
.address_size 64

.visible .entry kbv3_spread(.param .u64 out, .param .u32 iters)
{
    .reg .pred %p<3>;
    .reg .b32 %r<8>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [iters];
    mov.u64 %rd2, %globaltimer;
    mov.u32 %r2, %smid;
    mov.u32 %r3, %tid.x;
    cvt.rn.f32.u32 %f1, %r3;
    mov.f32 %f2, 0f3F800000;
    mov.u32 %r4, 0;
LOOP:
    setp.ge.u32 %p1, %r4, %r1;
    @%p1 bra CHAINED;
    fma.rn.f32 %f1, %f1, 0f3F7FFFFF, %f2;
    add.u32 %r4, %r4, 1;
    bra LOOP;
CHAINED:
    bar.sync 0;
    mov.u64 %rd3, %globaltimer;
    setp.ne.u32 %p2, %r3, 0;
    @%p2 bra END;
    mov.u32 %r5, %ctaid.x;
    mul.wide.u32 %rd4, %r5, 32;
    add.u64 %rd4, %rd1, %rd4;
    cvt.u64.u32 %rd5, %r2;
    st.global.u64 [%rd4], %rd5;
    st.global.u64 [%rd4+8], %rd2;
    st.global.u64 [%rd4+16], %rd3;
    mov.b32 %r6, %f1;
    st.global.u32 [%rd4+24], %r6;
END:
    ret;
}
\0"""

EMPTY_PTX = b""".version 7.0
.target sm_70
.address_size 64

.visible .entry kbv3_empty()
{
    ret;
}
\0"""


def placement(records, grid: int, exit_at: int | None = None) -> dict:
    """Distinct SMs, the most blocks on one SM, the span and the starts' spread (us) of one
    launch's `records` (a (grid, 4) int64 tensor on the host); behind HOLD also `open_us`, the
    first block's start less HOLD's exit deadline (`exit_at`, %globaltimer ns)."""
    rows = records.tolist()[:grid]
    per_sm = collections.Counter(r[0] for r in rows)
    starts, ends = [r[1] for r in rows], [r[2] for r in rows]
    found = {
        "sms": len(per_sm),
        "most_on_one_sm": max(per_sm.values()),
        "span_us": (max(ends) - min(starts)) / 1e3,
        "start_spread_us": (max(starts) - min(starts)) / 1e3,
    }
    if exit_at is not None:
        found["open_us"] = (min(starts) - exit_at) / 1e3
    return found


def behind_hold(held, queue: Callable[[], None], scratch: tuple[int, int]) -> int:
    """One window: `held` (a `Hold`) takes every SM, `queue()` enqueues what waits behind it, HOLD
    writes and flushes a little of `scratch` (src, dst device addresses), lets go and everything
    ends; HOLD's exit deadline (%globaltimer ns)."""
    import torch

    src, dst = scratch
    held.take(src, dst, 4096, (src, 4096), (dst, 4096))
    queue()
    time.sleep(QUEUE_SETTLE_S)  # the launches reach the GPU before PREP
    held.prepare()
    held.go()
    torch.cuda.synchronize()
    return int(held.counters.view(torch.int64)[EXIT_AT // 8])


def _summary(name: str, threads: int, grid: int, delay, trials: list[dict], hold_threads: int | None = None) -> dict:
    def med(key):
        return round(statistics.median(t[key] for t in trials), 3)

    opened = {"open_us_median": med("open_us")} if all("open_us" in t for t in trials) else {}
    return {
        "variant": name,
        "threads": threads,
        "grid": grid,
        "release_delay_ns": delay,
        "hold_threads": hold_threads,
        **opened,
        "trials": len(trials),
        "sms_median": med("sms"),
        "sms_min": min(t["sms"] for t in trials),
        "most_on_one_sm_median": med("most_on_one_sm"),
        "span_us_median": med("span_us"),
        "start_spread_us_median": med("start_spread_us"),
    }


def run(out: Path, trials: int, iters: int) -> None:
    import torch

    torch.zeros(1, device="cuda")  # torch's context current first: the driver loads modules into it
    driver = Driver()
    spread = driver._kernel(SPREAD_PTX, b"kbv3_spread")
    empty = driver._kernel(EMPTY_PTX, b"kbv3_empty")
    stream = torch.cuda.ExternalStream(driver.create_stream())
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    records = torch.zeros(RECORD_WORDS * 4 * sms, dtype=torch.int64, device="cuda")  # room for 4 blocks an SM
    scratch = torch.zeros(1 << 16, dtype=torch.uint8, device="cuda")  # HOLD's copy, flush and dirty
    src, dst = scratch.data_ptr(), scratch.data_ptr() + (1 << 15)

    def launch(threads: int, grid: int) -> None:
        driver.launch(spread, stream, grid, threads, ctypes.c_uint64(records.data_ptr()), ctypes.c_uint32(iters))

    def journal(entry: dict) -> None:
        with out.open("a") as f:
            f.write(json.dumps(entry) + "\n")
        print(json.dumps(entry), flush=True)

    for threads, per_sm in SHAPES:
        grid = sms * per_sm
        launch(threads, grid)  # warm: the module loaded, the clocks up
        torch.cuda.synchronize()
        idle = []
        for _ in range(trials):
            launch(threads, grid)
            torch.cuda.synchronize()
            idle.append(placement(records.view(-1, RECORD_WORDS).cpu(), grid))
        journal(_summary("idle", threads, grid, None, idle))
        variants = [(d, False, None) for d in DELAYS_NS] + [(0, True, None), (RELEASE_DELAY_NS, True, None)]
        variants += [(RELEASE_DELAY_NS, False, t) for t in HOLD_BLOCK_THREADS] + [(0, False, HOLD_BLOCK_THREADS[-1])]
        for delay, absorb, hold_threads in variants:
            name = "absorb" if absorb else "hold"
            failed = {
                "variant": name,
                "threads": threads,
                "grid": grid,
                "release_delay_ns": delay,
                "hold_threads": hold_threads,
            }
            try:
                held, found = Hold(driver, limit_s=2.0, release_delay_ns=delay, block_threads=hold_threads), []
            except Exception as exc:  # noqa: BLE001 - a shape this GPU cannot take: say so, go on
                journal({**failed, "error": f"{type(exc).__name__}: {exc}"[:400]})
                continue

            def queue(held=held, absorb=absorb, threads=threads, grid=grid) -> None:
                if absorb:  # HOLD's shape, nothing to do: it takes the SMs as they free
                    driver.launch(empty, stream, held.blocks, held.threads)
                launch(threads, grid)  # queued behind HOLD, as a held call is

            try:
                for _ in range(trials):
                    exit_at = behind_hold(held, queue, (src, dst))
                    found.append(placement(records.view(-1, RECORD_WORDS).cpu(), grid, exit_at))
                journal(_summary(name, threads, grid, delay, found, hold_threads))
            except Exception as exc:  # noqa: BLE001 - one broken variant must not end the probe
                journal({**failed, "error": f"{type(exc).__name__}: {exc}"[:400]})
            finally:
                held.close()


def best_hold_threads(path: Path) -> int | None:
    """The HOLD block size whose held grids (at the default delay) used the most SMs, summed over
    the probe's shapes; None where no smaller block did better than the fewest blocks."""
    used: dict = collections.defaultdict(float)
    for line in path.read_text().splitlines():
        e = json.loads(line)
        if e.get("variant") == "hold" and e.get("release_delay_ns") == RELEASE_DELAY_NS and "error" not in e:
            used[e.get("hold_threads")] += e["sms_median"]
    best = max(used, key=lambda t: used[t], default=None)
    return best if best is not None and used[best] > used.get(None, 0.0) else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--iters", type=int, default=20000, help="FMAs a thread (about 45 us alone on an SM)")
    parser.add_argument("--no-mps", action="store_true")
    parser.add_argument("--best", action="store_true", help="print the best HOLD block size in OUT (or 0), run nothing")
    args = parser.parse_args()
    if args.best:
        print(best_hold_threads(args.out) or 0)
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with mps.daemon(not args.no_mps) as under_mps:  # before any CUDA context of this process
        import torch

        gpu = torch.cuda.get_device_name(0)
        print(json.dumps({"variant": "probe", "mps": under_mps, "gpu": gpu}), flush=True)
        with args.out.open("a") as f:
            f.write(json.dumps({"variant": "probe", "mps": under_mps, "gpu": gpu}) + "\n")
        run(args.out, args.trials, args.iters)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
