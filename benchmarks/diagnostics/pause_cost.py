"""What stopping the solution's side costs the timer (`session.pause.ProcessPause`), per call.

Every timed call stops the solution's side (and the echo's) and proves it stopped: a walk of the
zygote's tree and, per thread, its status and its scheduler record from /proc. A CUDA solution
process has tens of threads. This starts a stand-in (a root with one member of THREADS sleeping
threads, like a zygote and its solution process) and times `stop()` after a `resume()`, ROUNDS
times, and `others_still()`; it prints one line per thread count. CPU only, no GPU needed:

    PYTHONPATH=. python3 benchmarks/diagnostics/pause_cost.py 10 40
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

from kernelbench_v3.evaluate.supervisor.session.pause import ProcessPause

STAND_IN = """
import os, threading, time
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    for _ in range({threads}):
        threading.Thread(target=lambda: time.sleep(1000), daemon=True).start()
    print(os.getpid(), flush=True)
    time.sleep(1000)
else:
    time.sleep(1000)
"""


def one(threads: int, rounds: int) -> str:
    root = subprocess.Popen([sys.executable, "-c", STAND_IN.format(threads=threads)], stdout=subprocess.PIPE, text=True)
    member = int(root.stdout.readline())
    time.sleep(0.5)
    try:
        pause = ProcessPause(root.pid, [member])
        pause.stop()
        stops = []
        for _ in range(rounds):
            pause.resume(member)
            started = time.perf_counter()
            pause.stop()
            stops.append(time.perf_counter() - started)
        started = time.perf_counter()
        for _ in range(rounds):
            pause.others_still(-1)
        others = (time.perf_counter() - started) / rounds
    finally:
        os.killpg(member, signal.SIGKILL)
        root.kill()
    stops.sort()
    return (
        f"| {threads + 1} | {stops[len(stops) // 2] * 1e3:.2f} | {stops[int(len(stops) * 0.9)] * 1e3:.2f} "
        f"| {others * 1e3:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("threads", type=int, nargs="+", help="threads of the stand-in member besides its main one")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; {args.rounds} rounds")
    print("| threads | stop median ms | stop p90 ms | others_still ms |")
    print("|---|---|---|---|")
    for n in args.threads:
        print(one(n, args.rounds), flush=True)


if __name__ == "__main__":
    main()
