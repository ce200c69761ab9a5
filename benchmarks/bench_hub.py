"""Benchmark: build the Hub dataset folder from problems/ and load all three splits back.

Target: build + load of all three splits in under 5 s on the 2-core development machine.
Prints the wall time of each phase in this process (imports counted separately, since any
user of the library pays them once). The loading side runs offline, in its own HF cache.

    python benchmarks/bench_hub.py [--problems DIR] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=Path, default=None, help="problems folder (default: bundled)")
    parser.add_argument("--repeat", type=int, default=3, help="timed build+load rounds after the first")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-hub-"))
    os.environ["HF_HOME"] = str(work / "hf")
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ["KBV3_MODULE_DIR"] = str(work / "modules")

    t0 = time.perf_counter()
    import torch  # noqa: F401 - timed on its own

    t_torch = time.perf_counter() - t0
    t0 = time.perf_counter()
    import datasets

    from kernelbench_v3 import hub

    datasets.disable_progress_bars()
    t_imports = time.perf_counter() - t0

    print(f"python {platform.python_version()}, torch {torch.__version__}, datasets {datasets.__version__}, "
          f"{os.cpu_count()} CPUs")
    print(f"import torch: {t_torch:.2f} s; import datasets + kernelbench_v3.hub: {t_imports:.2f} s")

    rounds = []
    for i in range(1 + args.repeat):
        out = work / f"build{i}"
        cache = work / f"cache{i}"  # a fresh datasets cache: every load converts Parquet -> Arrow
        t0 = time.perf_counter()
        result = hub.build(out, args.problems)
        t_build = time.perf_counter() - t0
        t0 = time.perf_counter()
        counts = {s: len(hub.load_problems(s, out, cache_dir=str(cache))) for s in hub.SPLITS}
        t_load = time.perf_counter() - t0
        assert counts == dict(result.counts), (counts, result.counts)
        label = "first (cold: meta kernels, prompt templates)" if i == 0 else f"repeat {i}"
        print(f"round {i} {label}: build {t_build:.2f} s + load 3 splits {t_load:.2f} s = "
              f"{t_build + t_load:.2f} s  rows {counts}, prompts={result.with_prompts}")
        rounds.append(t_build + t_load)
    first, best = rounds[0], min(rounds[1:]) if len(rounds) > 1 else rounds[0]
    print(f"build + load, first in process: {first:.2f} s; repeated (best): {best:.2f} s; target < 5 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
