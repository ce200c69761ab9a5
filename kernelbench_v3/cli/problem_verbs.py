"""`kbv3` verbs over the problems and the dataset: ls, validate, prompts, extract, build, demo.

Each verb has an `add_<verb>` function that declares its arguments and a `run_<verb>` function that
runs it; library imports happen inside `run_*` so `kbv3 --help` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..vocab import SPLITS
from .args import CliError, check_cuda, check_writable_parent
from .flags import add_device, add_json, add_problems, add_split, add_template


def add_ls(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ls",
        help="list the problems (optionally one split)",
        description="List the problems, optionally of one split; --json prints one JSON object per problem and line.",
    )
    add_split(p)
    add_problems(p)
    add_json(p)
    p.set_defaults(func=cmd_ls)


def cmd_ls(args: argparse.Namespace) -> int:
    from ..catalog.problem import discover

    problems = sorted(discover(args.problems, split=args.split), key=lambda p: natural_key(p.problem_id))
    if not args.json:
        print(f"{'problem':<60} {'level':<7}  {'op type':<16} splits")
    for p in problems:
        if args.json:
            print(
                json.dumps(
                    {
                        "problem_id": p.problem_id,
                        "file_name": p.file_name,
                        "category": p.category,
                        "level": p.level,
                        "op_type": p.op_type,
                        "gpus": list(p.gpus),
                        "supported_precisions": list(p.supported_precisions),
                        "cpu_unsupported": p.cpu_unsupported,
                    }
                )
            )
        else:
            print(f"{p.problem_id:<60} {p.level:<7}  {p.op_type:<16} {','.join(p.gpus)}")
    return 0


def natural_key(problem_id: str) -> tuple:
    """`level1/2_...` before `level1/10_...`: digits compare as numbers, as a person reads them."""
    import re

    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", problem_id))


def add_validate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check every problem file parses and declares what it must")
    add_problems(p)
    p.set_defaults(func=cmd_validate)


def cmd_validate(args: argparse.Namespace) -> int:
    from ..catalog.problem import CatalogError, discover

    try:
        problems = discover(args.problems)
    except CatalogError as exc:
        print(exc, file=sys.stderr)
        return 1
    counts = {s: sum(s in p.gpus for p in problems) for s in SPLITS}
    print(f"{len(problems)} problems; " + ", ".join(f"{s}: {n}" for s, n in counts.items()))
    return 0


def add_prompts(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prompts", help="write one prompt per problem of a split as JSON lines")
    add_split(p, required=True)
    add_template(p)
    p.add_argument("--one-shot", action="store_true", help="include the worked example")
    add_problems(p)
    p.add_argument("--out", type=Path, required=True, help="output .jsonl file")
    p.set_defaults(func=cmd_prompts)


def cmd_prompts(args: argparse.Namespace) -> int:
    from ..prompts import TemplateError, prompt_rows, write_jsonl

    check_writable_parent(args.out, "--out")
    try:
        count = write_jsonl(prompt_rows(args.split, args.template, args.one_shot, problems_dir=args.problems), args.out)
    except TemplateError as exc:
        print(f"kbv3 prompts: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {count} prompts for {args.split} to {args.out}")
    return 0


def add_extract(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("extract", help="pull the solution file out of a model's response")
    p.add_argument("response", type=Path, help="the response text (Markdown)")
    p.add_argument("--out", type=Path, required=True, help="where to write solution.py")
    p.set_defaults(func=cmd_extract)


def cmd_extract(args: argparse.Namespace) -> int:
    from ..prompts.extract import ExtractionError, extract_file

    if not args.response.is_file():
        raise CliError(f"response file {args.response} does not exist")
    check_writable_parent(args.out, "--out")
    try:
        solution = extract_file(args.response, args.out)
    except ExtractionError as exc:
        print(f"kbv3 extract: {exc}", file=sys.stderr)
        return 1
    print(
        f"wrote {args.out} (class {solution.class_name}, block at line {solution.line} "
        f"of {args.response}, {solution.block_count} fenced block(s) in the response)"
    )
    return 0


def add_build(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "build",
        help="write the Hub dataset folder: one Parquet file per GPU split and the card README.md",
        description="Build the Hugging Face dataset folder from a problems folder. Deterministic "
        "(same problems, same bytes) and all-or-nothing: a malformed problem file is reported "
        "and nothing is written.",
    )
    p.add_argument("out_dir", type=Path, help="folder to write (new or empty, unless --overwrite)")
    add_problems(p)
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty OUT_DIR")
    p.add_argument("--no-prompts", action="store_true", help="leave out the per-split prompt column")
    p.set_defaults(func=cmd_build)


def cmd_build(args: argparse.Namespace) -> int:
    from ..catalog.problem import CatalogError
    from ..dataset.hub import build

    check_writable_parent(args.out_dir, "OUT_DIR")
    try:
        result = build(
            args.out_dir,
            args.problems,
            overwrite=args.overwrite,
            with_prompts=False if args.no_prompts else None,
        )
    except CatalogError as exc:
        print(f"kbv3 build: {exc}", file=sys.stderr)
        return 1
    except FileExistsError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:  # the folder cannot be written; the build leaves nothing behind
        raise CliError(f"cannot write {args.out_dir}: {exc.strerror or exc}; choose a writable folder") from None
    counts = ", ".join(f"{split}: {n}" for split, n in result.counts.items())
    print(f"wrote {result.out_dir} ({counts} rows; prompt column: {'yes' if result.with_prompts else 'no'})")
    return 0


def add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="the main job on the bundled defaults: build the dataset, load a split back, "
        "evaluate the bundled example solutions",
    )
    p.add_argument("--out", type=Path, default=Path("out"), help="output folder (default: out)")
    add_split(p, default="h100")
    add_device(p)
    p.add_argument(
        "--all-examples",
        action="store_true",
        help="kept for compatibility: every bundled example of the split is evaluated (on CPU about 10-20 s each)",
    )
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    if args.device == "cuda":
        check_cuda("--device cuda")
    check_writable_parent(args.out / "records.jsonl", "--out")
    records = run_demo(args.out, split=args.split, device=args.device, all_examples=args.all_examples)
    return 0 if records and all(r["correct"] for r in records) else 1
