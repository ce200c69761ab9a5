"""Build the KernelBench-v3 problems dataset folder for the Hugging Face Hub.

`datasets` 4 and later no longer run dataset loading scripts, so this is not one: it is the
build step that writes what the Hub serves, a plain Parquet file per GPU split
(`data/rtx3090.parquet`, `data/h100.parquet`, `data/b200.parquet`) plus the card `README.md`
whose YAML `configs` map the splits to those files. It does the same as `kbv3 build`:

    python loading_script.py OUT_DIR [--problems DIR] [--overwrite] [--no-prompts]

Then publish with `kernelbench_v3.dataset.hub.push_to_hub(OUT_DIR, "Infatoshi/kernelbench-v3-problems")`.
"""

from __future__ import annotations

import sys

from kernelbench_v3.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["build", *sys.argv[1:]]))
