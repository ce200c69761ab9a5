"""What the GPU timing diagnostics (`diag_*_gpu.py`) share: one JSON line per measurement appended
to `--out` over several fresh processes, `--run` rotating which variant goes first, and
`--report` turning the finished file into tables."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path


def add_run_arguments(parser: argparse.ArgumentParser, variants: Iterable[str], default: str) -> None:
    parser.add_argument("--out", type=Path, help="append JSON lines here")
    parser.add_argument("--run", type=int, default=0, help="run number (rotates the variant order)")
    parser.add_argument("--variants", default=default, help=f"comma list of {', '.join(variants)}")
    parser.add_argument("--report", type=Path, help="print the tables of a finished --out file and exit")


def chosen_variants(parser: argparse.ArgumentParser, args: argparse.Namespace, known: Iterable[str]) -> list[str]:
    """The --variants list, with a parser error naming any unknown one; --out must be given."""
    if not args.out:
        parser.error("--out is required unless --report is given")
    known = list(known)
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in known]
    if unknown:
        parser.error(f"--variants: unknown {unknown}; known: {', '.join(known)}")
    return variants


def rotated(items: Sequence[str], run: int) -> list[str]:
    """`items` starting at position `run` (mod len), so no variant always goes first."""
    k = run % len(items)
    return list(items[k:]) + list(items[:k])


def append_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("a") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_or_report(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    report: Callable[[Path], str],
    measure: Callable[[list[str]], list[dict]],
    known: Iterable[str],
) -> int:
    """--report: print the tables and return; otherwise measure the chosen variants and append them."""
    if args.report:
        print(report(args.report))
        return 0
    variants = chosen_variants(parser, args, known)
    append_jsonl(args.out, measure(variants))
    return 0
