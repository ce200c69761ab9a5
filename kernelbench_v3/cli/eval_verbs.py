"""`kbv3` verbs that evaluate: eval (one solution) and eval-batch (a folder, resumably).

Both declare the evaluator's options through `options.add_eval_options` and turn them into one
`EvalOptions`, so the two verbs cannot drift apart.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..vocab import EXECUTORS, SIZE_MODES
from .args import (
    CliError,
    check_cuda,
    check_eval_problem,
    check_gpus,
    check_input_file,
    check_writable_parent,
    default_device,
    ignore_further_interrupts,
    positive_int,
    sizes_text,
    split_name,
)
from .eval_run import evaluate_here
from .flags import (
    add_cache,
    add_device,
    add_gpus,
    add_json,
    add_no_progress,
    add_only,
    add_problems,
    add_retry_failed_baseline,
    add_split,
    add_timing_seconds,
)
from .options import add_eval_options, eval_options_from


def add_eval(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate one solution file on one problem (isolated; correctness checks, timing)",
        description="Evaluate SOLUTION (a file defining Model or ModelNew) on a problem: a trusted supervisor "
        "drives a fresh, sandboxed solution process over a data-only channel: correctness over several seeds, "
        "stress inputs and a second shape; anti-cheat checks; timing against the faster of eager and "
        "torch.compile.",
    )
    p.add_argument("--problem", required=True, help="problem id, e.g. level1/23_Softmax")
    p.add_argument("--solution", required=True, type=Path, help="solution file")
    p.add_argument(
        "--gpu",
        default="h100",
        type=split_name,
        help="the split the result is reported for (its GPU's speed of light): rtx3090, h100 or b200; "
        "the problem must be in it. The GPU the evaluation runs on is recorded separately (ran_on)",
    )
    add_device(p)
    p.add_argument(
        "--sizes",
        type=sizes_text,
        help="size overrides NAME=VALUE,... of the problem's size variables (CPU default: REDUCED_SIZES)",
    )
    add_eval_options(p)
    p.add_argument("--model", default="", help="model name recorded with the result")
    add_problems(p)
    add_cache(p)
    add_json(p)
    p.add_argument(
        "--server", type=Path, metavar="SOCKET", help="send the evaluation to a running `kbv3 serve` on SOCKET"
    )
    # The MPS daemon starts beside eval's own start-up; `evaluate_here` waits for it (`cli.main`).
    # As the program it leaves by `os._exit` once the record is out (`cli.main.leave_now`).
    p.set_defaults(func=cmd_eval, overlaps_mps=True, leaves_at_once=True)


def cmd_eval(args: argparse.Namespace) -> int:
    from ..evaluate import describe_record

    check_input_file(args.solution, "argument --solution", "give the solution's .py file")
    sizes = check_eval_problem(args.problem, args.gpu, args.sizes, args.problems)
    if args.server is not None:
        from .serve_verbs import eval_on_server

        return eval_on_server(args, sizes)
    try:
        record = evaluate_here(args, sizes)  # its start-up overlapped, every second named
    except (KeyError, ValueError, FileNotFoundError) as exc:
        print(f"kbv3 eval: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(record.to_json())
    else:
        print(describe_record(record))
    return 0 if record.correct else 1


def add_eval_batch(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval-batch",
        help="evaluate a folder of solutions on every GPU (or a Ray cluster), resumably",
        description="Evaluate every solution under SOLUTIONS (laid out like problems/, or the runs "
        "dataset's <model>_<GPU>_<problem>.py.txt files). Each record is journaled as it "
        "finishes (<out>.journal.jsonl); rerunning the same command skips what is done.",
    )
    p.add_argument("solutions", type=Path, help="folder of solution files")
    add_split(p, required=True)
    p.add_argument("--out", required=True, type=Path, help="Parquet file of records to write (.parquet)")
    add_device(p)
    add_gpus(p)
    p.add_argument(
        "--workers",
        type=positive_int,
        help="worker processes: on CUDA, per GPU of --gpus (default: 2, and 1 for --split rtx3090's "
        "24 GB cards; one's reference phase runs beside the other's solution, while a solution "
        "process and its timing have the GPU to themselves); on --device cpu, in all (default: 1)",
    )
    p.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="local",
        help="local: --workers worker processes per GPU (or in all on the CPU) on this host; ray: one Ray task "
        "per evaluation, one GPU each, on the cluster of --address (default: local)",
    )
    p.add_argument("--address", help="Ray cluster address (default: start Ray in-process)")
    add_only(p)
    p.add_argument(
        "--limit",
        type=positive_int,
        metavar="N",
        help="only the first N problems (catalog order, after --only) with every sample of each (default: all)",
    )
    p.add_argument(
        "--shapes",
        choices=SIZE_MODES,
        help="problem shapes: the files' own (default on CUDA), or each problem's REDUCED_SIZES (default on CPU)",
    )
    # `--sizes` is eval's NAME=VALUE; here it would mean something else, so it only points the way.
    p.add_argument("--sizes", help=argparse.SUPPRESS)
    add_eval_options(p)
    add_problems(p)
    p.add_argument(
        "--model", help="model name for a problems/-style folder (default: its name; samples.json names its own)"
    )
    p.add_argument("--journal", type=Path, help="journal path (default: <out>.journal.jsonl)")
    p.add_argument(
        "--retry-errors",
        action="store_true",
        help="also rerun journaled records whose status is 'error' (evaluator failures)",
    )
    add_no_progress(p)
    p.set_defaults(func=cmd_eval_batch)


PARQUET_SUFFIXES = (".parquet", ".pq")


def cmd_eval_batch(args: argparse.Namespace) -> int:
    import signal

    from ..batch.run import BatchError, BatchSettings, UnknownSolutionError, describe_batch, run_batch

    # Every check before anything is created: a refused command leaves no Parquet or journal.
    if not args.solutions.is_dir():
        what = "is a file, not a folder" if args.solutions.is_file() else "does not exist"
        raise CliError(f"solutions folder {args.solutions} {what}")
    if args.sizes is not None:
        raise CliError(
            "argument --sizes: eval-batch takes --shapes default|reduced (NAME=VALUE sizes are `kbv3 eval --sizes`)"
        )
    if args.out.suffix not in PARQUET_SUFFIXES:
        raise CliError(
            f"argument --out: eval-batch writes Parquet; name the file .parquet (got {args.out.name}); "
            "`kbv3 report` reads it"
        )
    if args.address and args.executor != "ray":
        raise CliError("argument --address: only used with --executor ray")
    device = check_gpus(args.device, args.gpus, args.executor)
    check_writable_parent(args.out, "--out")
    if args.journal is not None:
        check_writable_parent(args.journal, "--journal")

    def stop(signum, frame):  # SIGTERM: unwind so workers stop and the Parquet is written
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    settings = BatchSettings(
        split=args.split,
        device=device,
        sizes=args.shapes or ("reduced" if device == "cpu" else "default"),
        problems_root=str(args.problems.resolve()) if args.problems else None,
        options=eval_options_from(args),
    )
    gpus = list(args.gpus) if args.gpus else None
    try:
        result = run_batch(
            args.solutions,
            args.out,
            settings,
            executor=args.executor,
            gpus=gpus,
            workers=args.workers,
            address=args.address,
            journal=args.journal,
            model=args.model,
            retry_errors=args.retry_errors,
            progress=not args.no_progress,
            only=args.only,
            limit=args.limit,
        )
    except UnknownSolutionError as exc:  # a mistyped file name: usage, as an unknown --problem of `eval`
        raise CliError(str(exc)) from None
    except BatchError as exc:
        print(f"kbv3 eval-batch: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        ignore_further_interrupts()
        print("kbv3 eval-batch: interrupted; rerun the same command to finish", file=sys.stderr)
        return 130
    print(describe_batch(result))
    # As `eval`: 1 when the work ran and found a failure (README, Exit codes).
    return 0 if all(r.get("status") == "correct" for r in result.records) else 1


def _ms_or_na(value) -> str:
    """A baseline's time as the line shows it: `1.5`, or `n/a` where that way was not timed (never nan)."""
    return "n/a" if value is None else f"{value:.4g}"


CPU_BASELINE_NOTE = (
    "note: these are CPU times, no performance figure: no speedup is scored on the CPU, so a CPU "
    "baseline serves only `--baseline` runs on this machine (timing_details.cpu_time_ratio); time "
    "baselines on the GPU the evaluations will run on"
)


def add_baselines(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "baselines",
        help="time and cache the baselines of a split ahead of evaluations",
        description="Time the reference (eager and compiled) of every problem of SPLIT, or of "
        "--only, exactly as an evaluation would, and cache it; later evaluations on this GPU find "
        "it cached. A problem already cached is only reported.",
    )
    add_split(p, required=True)
    add_only(p)
    add_device(p)
    add_timing_seconds(p)
    add_retry_failed_baseline(p)
    add_problems(p)
    add_cache(p)
    p.set_defaults(func=cmd_baselines)


def cmd_baselines(args: argparse.Namespace) -> int:
    from ..catalog.problem import discover
    from ..evaluate import fill_baselines

    device = args.device or default_device()
    if device == "cuda":
        check_cuda("--device cuda")
    ids = [p.problem_id for p in discover(args.problems, split=args.split)]
    if args.only:
        unknown = [i for i in args.only if i not in ids]
        if unknown:
            raise CliError(f"argument --only: {', '.join(unknown)} not in the {args.split} split")
        ids = list(args.only)
    failed = 0
    print(f"kbv3 baselines: {len(ids)} problem(s) of {args.split} on {device}", file=sys.stderr)
    since = time.monotonic()
    for result in fill_baselines(
        ids,
        device=device,
        problems_dir=args.problems,
        cache_dir=args.cache,
        timing_seconds=args.timing_seconds,
        retry_failed=args.retry_failed_baseline,
    ):
        entry = result.entry
        now = time.monotonic()
        seconds, since = now - since, now  # this problem's, from the cache's look on
        how = "cached" if entry.get("cached") else f"timed in {seconds:.2f} s"
        if entry.get("failed"):
            failed += 1
            print(f"{result.problem_id}: failed ({how}): {str(entry.get('error'))[:300]}", flush=True)
        else:
            print(
                f"{result.problem_id}: {entry['baseline_ms']:.4g} ms ({entry['baseline_type']}; eager "
                f"{_ms_or_na(entry.get('eager_ms'))}, compiled {_ms_or_na(entry.get('compiled_ms'))}) [{how}]",
                flush=True,
            )
    if device == "cpu":
        # The figures above are real CPU times, but no score uses them: said where they are read.
        print(CPU_BASELINE_NOTE)
    return 1 if failed else 0
