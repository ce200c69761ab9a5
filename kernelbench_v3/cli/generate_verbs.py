"""`kbv3 generate`: every problem of a split sent to a model, N samples each, into a run folder
that `kbv3 eval-batch RUN_DIR/solutions` evaluates.

The API key is read from the environment variable `--api-key-env` names and handed to the
client only; it is never printed, and messages that could carry it are scrubbed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .args import CliError, check_writable_parent, ignore_further_interrupts, positive_int
from .flags import add_endpoint, add_no_progress, add_only, add_problems, add_split, add_template


def add_generate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "generate",
        help="send every problem's prompt to an OpenAI-compatible model, N samples each, into a run folder",
        description="Send each problem's prompt (the template `kbv3 prompts` uses) to an OpenAI-compatible "
        "chat-completions endpoint (vLLM, SGLang, OpenAI, OpenRouter...). Responses are journaled as they "
        "arrive (RUN_DIR/responses.jsonl); rerunning the same command sends only what is missing. Each "
        "response is extracted into RUN_DIR/solutions/, which `kbv3 eval-batch` evaluates.",
    )
    add_split(p, required=True)
    add_endpoint(p)
    p.add_argument("--samples", type=positive_int, default=1, help="samples per problem (default: 1)")
    p.add_argument("--concurrency", type=positive_int, default=4, help="requests in flight at once (default: 4)")
    add_only(p)
    add_template(p)
    add_problems(p)
    # Its old name: refused with the new one named, rather than argparse's "unrecognized arguments".
    p.add_argument("--problems-dir", help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, required=True, metavar="RUN_DIR", help="the run folder (created or resumed)")
    add_no_progress(p)
    p.set_defaults(func=cmd_generate)


def endpoint_key(args: argparse.Namespace) -> str | None:
    """The API key from the variable `--api-key-env` names (None without the flag), after checking
    `--base-url`; CliError for either mistake. The key goes to the client only, never printed."""
    from ..generate.client import check_base_url

    try:
        check_base_url(args.base_url)
    except ValueError as exc:
        raise CliError(f"argument --base-url: {exc}") from None
    if not args.api_key_env:
        return None
    key = os.environ.get(args.api_key_env)
    if not key:
        raise CliError(f"argument --api-key-env: environment variable {args.api_key_env} is not set or empty")
    return key


def endpoint_client(args: argparse.Namespace, key: str | None):
    """The chat-completions client `add_endpoint`'s flags describe."""
    from ..generate.client import ChatClient, RetryPolicy

    return ChatClient(args.base_url, key, timeout_s=args.timeout, retry=RetryPolicy(retries=args.retries))


def cmd_generate(args: argparse.Namespace) -> int:
    from ..generate.client import scrub
    from ..generate.run import GenerateError, GenerateSettings, describe, run_generate

    if args.problems_dir is not None:
        raise CliError("argument --problems-dir: renamed --problems (a problems folder, as in every verb)")
    key = endpoint_key(args)
    check_writable_parent(args.out / "responses.jsonl", "--out")
    settings = GenerateSettings(
        split=args.split,
        model=args.model,
        samples=args.samples,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        template=args.template,
        problems=args.only or (),
        problems_root=str(args.problems.resolve()) if args.problems else None,
    )
    client = endpoint_client(args, key)
    try:
        result = run_generate(settings, args.out, client, concurrency=args.concurrency, progress=not args.no_progress)
    except GenerateError as exc:
        raise CliError(scrub(str(exc), key)) from None
    except KeyboardInterrupt:
        ignore_further_interrupts()
        print(
            "kbv3 generate: interrupted; every response that arrived is in the journal, "
            "rerun the same command to send the rest",
            file=sys.stderr,
        )
        return 130
    finally:
        client.close()
    print(scrub(describe(result), key))
    return 1 if result.failed_requests else 0
