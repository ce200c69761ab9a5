"""The `kbv3` command: thin verbs over the library.

The verbs live in `problem_verbs`, `generate_verbs`, `agent_verbs`, `eval_verbs`, `serve_verbs` and `runs_verbs` (each with `add_<verb>` and
`run_<verb>`); argument checks in `args`; the evaluator's options in `options`. `main` turns a
user's mistake into one line on stderr and an exit code (EXIT_CODES), never a traceback.
"""

from __future__ import annotations

import argparse
import sys

from ..evaluate import Wall, mps_starting, mps_wanted, process_started
from . import agent_verbs, eval_verbs, generate_verbs, problem_verbs, runs_verbs, serve_verbs, served
from .args import CliError, KbParser, ignore_further_interrupts

# What `kbv3` exits with (README "Exit codes").
EXIT_CODES = {
    0: "success (eval: the solution is correct)",
    1: "the work ran and found a failure: a solution incorrect or failing, malformed problem "
    "files, a runs table that breaks the schema, no solution in a response",
    2: "usage: a wrong argument or value, a missing file or folder, an unwritable output, "
    "CUDA asked for where none is visible",
    130: "interrupted (Ctrl-C)",
    141: "stdout was closed early (e.g. piped into `head`); nothing more is printed",
}


VERBS = [
    problem_verbs.add_ls,
    problem_verbs.add_validate,
    problem_verbs.add_prompts,
    problem_verbs.add_extract,
    generate_verbs.add_generate,
    agent_verbs.add_agent,
    eval_verbs.add_eval,
    eval_verbs.add_eval_batch,
    eval_verbs.add_baselines,
    serve_verbs.add_serve,
    problem_verbs.add_build,
    problem_verbs.add_demo,
    runs_verbs.add_runs,
    runs_verbs.add_report,
]


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("kernelbench-v3")
    except Exception:  # noqa: BLE001 - a source tree that is not installed
        from .. import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = KbParser(prog="kbv3", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"kbv3 (kernelbench-v3) {_version()}")
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for add in VERBS:
        add(sub)
    return parser


def _quiet_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the exit-time flush cannot fail too."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: list[str] | None = None, wall: Wall | None = None) -> int:
    """Run one verb; a user's mistake gives one line on stderr and an exit code (EXIT_CODES)."""
    # Every second of the process in a named step (`Record.wall_phase_s`): from its start when
    # this is the program (argv None), from now when a caller (a test) runs a verb in-process,
    # from the client's start when the warm server runs it (`served`, which passes its `wall`).
    wall = wall or Wall(started=process_started() if argv is None else None)
    wall.to("cli_args")
    args = build_parser().parse_args(argv)
    args.wall = wall
    verb = f"kbv3 {args.verb}"
    try:
        # The timed calls of a verb that times on a GPU run under MPS, started once for the verb:
        # before it, or (a verb that sets `overlaps_mps`: `eval`) beside its own start-up, which
        # then waits for the daemon (`args.mps.ready()`) before its first CUDA context.
        wanted = mps_wanted(getattr(args, "no_mps", None), getattr(args, "device", None))
        wanted = wanted and getattr(args, "server", None) is None  # a service runs under its own daemon
        with mps_starting(wanted) as mps:
            args.mps = mps
            if not getattr(args, "overlaps_mps", False):
                mps.ready()
            code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers, not at exit
        if argv is None and getattr(args, "leaves_at_once", False) and not _observed():
            leave_now(code)
        return code
    except CliError as exc:
        print(f"{verb}: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        ignore_further_interrupts()
        print(f"{verb}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return 141
    except OSError as exc:  # a folder that cannot be written, a disk that is full, ...
        where = f" {exc.filename}" if exc.filename else ""
        print(f"{verb}: cannot use{where}: {exc.strerror or exc}; check the path and its permissions", file=sys.stderr)
        return 2


def _observed() -> bool:
    """Whether a profiler, tracer or coverage tool watches this process: they write what they
    gathered at the exit `leave_now` would skip (`python -m cProfile -o ... -m kernelbench_v3.cli eval`)."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return True
    monitoring = getattr(sys, "monitoring", None)  # Python 3.12+: tools without a trace function
    return monitoring is not None and any(monitoring.get_tool(i) is not None for i in range(6))


def leave_now(code: int) -> None:
    """Flush and leave by `os._exit`, without Python's shutdown.

    After an interrupt (130): that shutdown restores the default SIGINT handler, so a second Ctrl-C
    arriving during it would end the process by the signal instead of with code 130. After a verb
    that sets `leaves_at_once` (`eval`, as the program): the shutdown of a process that imported
    torch and Triton costs about 0.6 s on a 2-core CPU (measured: `python -c "import torch,
    triton"` 2.0 s, with `os._exit` 1.4 s) and does nothing the verb needs: its record is written
    and flushed, its files closed, its zygote closed in the `teardown` step, the MPS daemon's
    reaper let go by closing a pipe, which the exit does too. The solution processes the zygote
    forks leave the same way. A process a profiler or coverage watches leaves normally (`_observed`)."""
    import os

    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        pass
    try:
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):
        pass
    os._exit(code)


def entry() -> None:
    """The `kbv3` program: `main`, then exit with its code (`leave_now` after an interrupt).
    A `kbv3 eval` is handed to the warm server where one answers (`served`)."""
    if served.wanted(sys.argv[1:]):
        code = served.run_served(sys.argv[1:], process_started())
        if code is not None:
            leave_now(code)
    code = main()
    if code == 130:
        leave_now(130)
    sys.exit(code)


if __name__ == "__main__":
    entry()
