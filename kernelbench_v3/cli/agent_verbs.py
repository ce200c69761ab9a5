"""`kbv3 agent`: a model works on each problem of a split over turns, with tools, into a run
folder whose results.csv is in the published runs schema.

The endpoint flags are `generate`'s (`flags.add_endpoint`), the key read the same way
(`generate_verbs.endpoint_key`): from the variable `--api-key-env` names, into the request
header only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .args import (
    CliError,
    check_cuda,
    check_writable_parent,
    default_device,
    ignore_further_interrupts,
    non_negative_number,
    positive_int,
    positive_seconds,
)
from .flags import add_device, add_endpoint, add_no_progress, add_only, add_problems, add_split
from .generate_verbs import endpoint_client, endpoint_key


def add_agent(sub: argparse._SubParsersAction) -> None:
    from ..agent.settings import DEFAULT_MAX_TURNS, LEVEL_TIME_LIMIT_S

    limits = ", ".join(f"level {level}: {seconds:g}" for level, seconds in LEVEL_TIME_LIMIT_S.items())
    p = sub.add_parser(
        "agent",
        help="a model writes, checks and submits a kernel over turns, one episode per problem, into a run folder",
        description="One episode per problem: an OpenAI-compatible chat-completions endpoint with function "
        "calling gets the reference, a workspace and the tools read_file, write_file, edit_file, check (feedback "
        "on public seeds) and submit. After submit() or at a limit the solution is judged like eval-batch, with "
        "secret seeds. Every message is journaled (RUN_DIR/transcripts/); rerunning the same command continues, "
        "and finished episodes send nothing. RUN_DIR/results.csv is in the published runs schema.",
    )
    add_split(p, required=True)
    add_endpoint(p)
    add_only(p)
    p.add_argument(
        "--max-turns",
        type=positive_int,
        default=DEFAULT_MAX_TURNS,
        help=f"model responses per episode (default: {DEFAULT_MAX_TURNS})",
    )
    p.add_argument(
        "--time-limit-s",
        type=positive_seconds,
        help=f"seconds per episode, its requests and tools (default: the published harness's per level, {limits})",
    )
    p.add_argument(
        "--concurrency",
        type=positive_int,
        default=1,
        help="episodes at a time; evaluations still run one at a time (default: 1)",
    )
    add_device(p)
    p.add_argument("--price-in", type=non_negative_number, metavar="USD", help="price per million prompt tokens")
    p.add_argument("--price-out", type=non_negative_number, metavar="USD", help="price per million completion tokens")
    add_problems(p)
    p.add_argument("--out", type=Path, required=True, metavar="RUN_DIR", help="the run folder (created or resumed)")
    add_no_progress(p)
    p.set_defaults(func=cmd_agent)


def cmd_agent(args: argparse.Namespace) -> int:
    from ..agent.run import AgentError, describe, run_agent
    from ..agent.settings import AgentSettings
    from ..generate.client import scrub

    key = endpoint_key(args)
    if (args.price_in is None) != (args.price_out is None):
        given, missing = ("--price-in", "--price-out") if args.price_in is not None else ("--price-out", "--price-in")
        raise CliError(f"argument {missing}: needed with {given} (estimated_cost_usd needs both prices)")
    if args.device == "cuda":
        check_cuda("--device cuda")
    device = args.device or default_device()
    check_writable_parent(args.out / "results.csv", "--out")
    settings = AgentSettings(
        split=args.split,
        model=args.model,
        device=device,
        max_turns=args.max_turns,
        time_limit_s=args.time_limit_s,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        problems=args.only or (),
        problems_root=str(args.problems.resolve()) if args.problems else None,
        price_in=args.price_in,
        price_out=args.price_out,
    )
    client = endpoint_client(args, key)
    try:
        result = run_agent(settings, args.out, client, concurrency=args.concurrency, progress=not args.no_progress)
    except AgentError as exc:
        raise CliError(scrub(str(exc), key)) from None
    except KeyboardInterrupt:
        ignore_further_interrupts()
        print(
            "kbv3 agent: interrupted; every step so far is in RUN_DIR/transcripts/, rerun the same command to continue",
            file=sys.stderr,
        )
        return 130
    finally:
        client.close()
    if result.refused:
        print(f"kbv3 agent: {scrub(result.refused, key)}", file=sys.stderr)
        return 2
    print(scrub(describe(result), key))
    return 0 if result.all_correct else 1
