"""`kbv3 serve` (the long-lived local evaluation service) and `kbv3 eval --server` (its client).

The service keeps one warm supervisor worker per GPU behind an owner-only Unix socket
(`kernelbench_v3.serve`); `kbv3 eval --server SOCKET` sends its evaluation there and prints what
`kbv3 eval` prints, with the same exit code.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from .args import CliError, check_gpus
from .flags import add_cache, add_device, add_gpus, add_problems


def add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="run a local evaluation service: one warm supervisor per GPU behind a Unix socket",
        description="Serve evaluations on an owner-only Unix socket (never a network port): one warm "
        "supervisor worker and zygote per GPU, requests queued per GPU, a fresh sandboxed process per "
        "solution. A crashed worker costs one record and is restarted. Stops on SIGTERM, SIGINT or a "
        "shutdown request (Evaluator(socket).shutdown()); the socket file is removed.",
    )
    p.add_argument(
        "--socket",
        type=Path,
        help="socket path (default: $KBV3_SOCKET, else $XDG_RUNTIME_DIR/kbv3/serve.sock, else the cache root); "
        "its folder is created 0700 when missing",
    )
    add_device(p)
    add_gpus(p)
    add_problems(p)
    add_cache(p)
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    from ..serve.protocol import default_socket_path
    from ..serve.server import ServeError, serve

    if args.device == "cpu" and args.gpus:
        raise CliError("argument --gpus: only used with --device cuda")
    device = check_gpus(args.device, args.gpus, "local")
    gpus = list(args.gpus) if args.gpus else None
    if device == "cuda" and gpus is None:
        import torch

        gpus = list(range(torch.cuda.device_count()))
    try:
        return serve(
            args.socket or default_socket_path(),
            device=device,
            gpus=gpus,
            problems_dir=args.problems,
            cache_dir=args.cache,
        )
    except ServeError as exc:
        raise CliError(f"argument --socket: {exc}") from None


def eval_on_server(args: argparse.Namespace, sizes: dict) -> int:
    """`kbv3 eval --server SOCKET`: the same evaluation, run by the service; the same output."""
    from ..evaluate import describe_record
    from ..serve.client import Evaluator, RequestError, ServiceError, ServiceUnavailable
    from .heartbeat import HEARTBEAT_S, heartbeat, say_on_stderr
    from .options import eval_options_from

    wall = getattr(args, "wall", None)  # every second named, as a local `kbv3 eval` (`evaluate.wall`)
    options = dataclasses.asdict(eval_options_from(args))
    if args.device is not None:
        options["device"] = args.device
    service = Evaluator(args.server)
    try:
        # Asked first, so a service that is not there or runs elsewhere is one line, as plain
        # `eval` checks before it says it starts.
        if wall is not None:
            wall.to("service_status")
        device = service.status().get("device", "?")
        if args.device is not None and args.device != device:
            print(
                f"kbv3 eval: this service evaluates on {device}, not {args.device!r}; "
                f"start one with --device {args.device}",
                file=sys.stderr,
            )
            return 2
        # The lines plain `kbv3 eval` prints, on stderr: --json keeps stdout one object.
        say_on_stderr(
            f"kbv3 eval: evaluating {args.problem} on {device} through the service at {args.server} "
            f"(a line every {HEARTBEAT_S:g} s) ..."
        )
        if wall is not None:
            wall.to("evaluation")  # the service's record brings its phases; the rest is evaluate_call
        with heartbeat(args.problem, say_on_stderr):
            record = service.evaluate(
                args.problem,
                Path(args.solution),
                gpu=args.gpu,
                sizes=sizes,
                model=args.model,
                problems_dir=args.problems,
                cache_dir=args.cache,
                **options,
            )
    except ServiceUnavailable as exc:
        raise CliError(f"argument --server: {exc}") from None
    except RequestError as exc:
        print(f"kbv3 eval: {exc}", file=sys.stderr)
        return 2
    except ServiceError as exc:
        raise CliError(str(exc), code=1) from None
    if wall is not None:
        wall.finish(record)
    if args.json:
        print(record.to_json())
    else:
        print(describe_record(record))
    return 0 if record.correct else 1
