"""The `kbv3` command: thin verbs over the library.

Each verb has an `_add_<verb>` function that declares its arguments and a `_cmd_<verb>` function
that runs it; library imports happen inside the command so `kbv3 --help` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _add_ls(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ls", help="list the problems (optionally one split)")
    p.add_argument("--split", choices=["rtx3090", "h100", "b200"])
    p.add_argument("--problems", type=Path, help="problems folder (default: the bundled one)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=_cmd_ls)


def _cmd_ls(args: argparse.Namespace) -> int:
    from .catalog import discover

    for p in discover(args.problems, split=args.split):
        if args.json:
            print(json.dumps({
                "problem_id": p.problem_id, "file_name": p.file_name, "category": p.category,
                "level": p.level, "op_type": p.op_type, "gpus": list(p.gpus),
                "supported_precisions": list(p.supported_precisions),
                "cpu_unsupported": p.cpu_unsupported,
            }))
        else:
            print(f"{p.problem_id:<60} level {p.level}  {p.op_type:<16} {','.join(p.gpus)}")
    return 0


def _add_validate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check every problem file parses and declares what it must")
    p.add_argument("--problems", type=Path, help="problems folder (default: the bundled one)")
    p.set_defaults(func=_cmd_validate)


def _cmd_validate(args: argparse.Namespace) -> int:
    from .catalog import SPLITS, CatalogError, discover

    try:
        problems = discover(args.problems)
    except CatalogError as exc:
        print(exc, file=sys.stderr)
        return 1
    counts = {s: sum(s in p.gpus for p in problems) for s in SPLITS}
    print(f"{len(problems)} problems; " + ", ".join(f"{s}: {n}" for s, n in counts.items()))
    return 0


VERBS = [_add_ls, _add_validate]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kbv3", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    for add in VERBS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
