"""The flags several `kbv3` verbs take, each declared once: its name, value type and help.

A flag means one thing in every verb: `--problems` is always a problems folder, `--only` always a
list of problem ids, `--split` always a split by any spelling, `--cache` always the cache folder.
Each verb module calls these functions instead of writing its own `add_argument`, so the help
texts cannot drift apart (`tests/cli/test_flags.py` compares them across verbs). A verb adds its
own flags (what `--out` writes differs by verb) with `add_argument` as usual.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..evaluate import DEFAULT_TIMING_SECONDS
from ..vocab import DEVICES
from .args import (
    SPLIT_METAVAR,
    gpu_indices,
    non_negative_int,
    non_negative_number,
    positive_int,
    positive_seconds,
    problems_dir,
    split_arg,
)

# Where the problem ids of `--only` are told apart from the folder of `--problems`.
ONLY_HELP = "only these problems of the split: comma-separated ids, e.g. level1/23_Softmax,level1/26_GELU_"


def problem_ids(text: str) -> tuple[str, ...]:
    """`level1/23_Softmax,level1/26_GELU_` -> the ids, in order, without repeats."""
    ids = tuple(dict.fromkeys(item.strip().removesuffix(".py") for item in text.split(",") if item.strip()))
    if not ids:
        raise argparse.ArgumentTypeError("no problem id given; e.g. level1/23_Softmax,level1/26_GELU_")
    return ids


def add_problems(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--problems",
        type=problems_dir,
        metavar="DIR",
        help="problems folder (default: the bundled one); problem ids go in --only where a verb takes them",
    )


def add_only(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", type=problem_ids, metavar="ID,...", help=ONLY_HELP + " (default: all of them)")


def add_split(p: argparse.ArgumentParser, *, required: bool = False, default: str | None = None) -> None:
    p.add_argument(
        "--split",
        type=split_arg,
        required=required,
        default=default,
        metavar=SPLIT_METAVAR,
        help="the benchmark split (its target GPU), in any spelling: h100, H100, RTX 3090",
    )


def add_device(p: argparse.ArgumentParser) -> None:
    """--device, and --no-mps: every verb that times on a GPU takes both."""
    p.add_argument("--device", choices=DEVICES, help="where to run (default: cuda when available, else cpu)")
    p.add_argument(
        "--no-mps",
        action="store_true",
        help="time without an MPS daemon (also KBV3_MPS=0). By default kbv3 runs its timed calls under "
        "MPS, starting a private daemon once per process; without it calls under about 0.15 ms are "
        "not resolved and read sol_ms null with timing_unresolved (docs/timing.md)",
    )


def add_gpus(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--gpus", type=gpu_indices, help="GPU indices, one worker each, e.g. 0,1 (default: all visible; CUDA only)"
    )


def add_cache(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cache",
        type=Path,
        metavar="DIR",
        help="cache folder of baselines and reference by-products (default: $KBV3_CACHE_DIR or ~/.cache/kbv3)",
    )


def add_json(p: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup) -> None:
    # What each verb's JSON holds is in the verb's description; the flag means the same everywhere.
    p.add_argument("--json", action="store_true", help="print JSON instead of text, nothing else on stdout")


def add_timing_seconds(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--timing-seconds",
        type=positive_seconds,
        help="timing budget per timed function, in seconds (default: "
        + ", ".join(f"{s:g} on {d.upper()}" for d, s in DEFAULT_TIMING_SECONDS.items())
        + ")",
    )


def add_retry_failed_baseline(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--retry-failed-baseline",
        action="store_true",
        help="re-time the baseline even if the cache holds a failure for it",
    )


def add_template(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--template", default="default", help="a bundled template name or the path of a Jinja2 template file"
    )


def add_endpoint(p: argparse.ArgumentParser) -> None:
    """The flags of a verb that talks to an OpenAI-compatible chat-completions endpoint."""
    p.add_argument("--model", required=True, help="the model name the endpoint serves (sent as `model`)")
    p.add_argument("--base-url", required=True, help="the API root, e.g. http://127.0.0.1:8000/v1")
    p.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="environment variable holding the API key (default: none is sent, as for a local server)",
    )
    p.add_argument("--temperature", type=non_negative_number, default=0.0, help="sampling temperature (default: 0)")
    p.add_argument("--max-tokens", type=positive_int, default=8192, help="answer length limit (default: 8192)")
    p.add_argument("--timeout", type=positive_seconds, default=600.0, help="seconds per request (default: 600)")
    p.add_argument(
        "--retries", type=non_negative_int, default=5, help="retries of a 429 or 5xx answer, with backoff (default: 5)"
    )


def add_no_progress(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


__all__ = [
    "ONLY_HELP",
    "add_cache",
    "add_device",
    "add_endpoint",
    "add_gpus",
    "add_json",
    "add_no_progress",
    "add_only",
    "add_problems",
    "add_retry_failed_baseline",
    "add_split",
    "add_template",
    "add_timing_seconds",
    "problem_ids",
]
