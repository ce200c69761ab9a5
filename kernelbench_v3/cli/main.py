"""The `kbv3` command: thin verbs over the library.

Each verb has an `_add_<verb>` function that declares its arguments and a `_cmd_<verb>` function
that runs it; library imports happen inside the command so `kbv3 --help` stays fast. Argument
checks live in `cli_args`; `main` turns a user's mistake into one line on stderr and an exit
code (EXIT_CODES), never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .args import (
    CliError,
    KbParser,
    check_cuda,
    check_eval_problem,
    check_gpus,
    check_writable_parent,
    gpu_indices,
    gpu_name,
    positive_int,
    positive_seconds,
    problems_dir,
    seeds,
    sizes_text,
)

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


def _add_ls(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ls", help="list the problems (optionally one split)")
    p.add_argument("--split", choices=["rtx3090", "h100", "b200"])
    p.add_argument("--problems", type=problems_dir, help="problems folder (default: the bundled one)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=_cmd_ls)


def _cmd_ls(args: argparse.Namespace) -> int:
    from ..catalog.problem import discover

    for p in discover(args.problems, split=args.split):
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
            print(f"{p.problem_id:<60} level {p.level}  {p.op_type:<16} {','.join(p.gpus)}")
    return 0


def _add_validate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check every problem file parses and declares what it must")
    p.add_argument("--problems", type=problems_dir, help="problems folder (default: the bundled one)")
    p.set_defaults(func=_cmd_validate)


def _cmd_validate(args: argparse.Namespace) -> int:
    from ..catalog.problem import SPLITS, CatalogError, discover

    try:
        problems = discover(args.problems)
    except CatalogError as exc:
        print(exc, file=sys.stderr)
        return 1
    counts = {s: sum(s in p.gpus for p in problems) for s in SPLITS}
    print(f"{len(problems)} problems; " + ", ".join(f"{s}: {n}" for s, n in counts.items()))
    return 0


def _add_prompts(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prompts", help="write one prompt per problem of a split as JSON lines")
    p.add_argument("--split", required=True, choices=["rtx3090", "h100", "b200"])
    p.add_argument(
        "--template", default="default", help="a bundled template name or the path of a Jinja2 template file"
    )
    p.add_argument("--one-shot", action="store_true", help="include the worked example")
    p.add_argument("--problems", type=problems_dir, help="problems folder (default: the bundled one)")
    p.add_argument("--out", type=Path, required=True, help="output .jsonl file")
    p.set_defaults(func=_cmd_prompts)


def _cmd_prompts(args: argparse.Namespace) -> int:
    from ..prompts import TemplateError, prompt_rows, write_jsonl

    check_writable_parent(args.out, "--out")
    try:
        count = write_jsonl(prompt_rows(args.split, args.template, args.one_shot, problems_dir=args.problems), args.out)
    except TemplateError as exc:
        print(f"kbv3 prompts: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {count} prompts for {args.split} to {args.out}")
    return 0


def _add_extract(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("extract", help="pull the solution file out of a model's response")
    p.add_argument("response", type=Path, help="the response text (Markdown)")
    p.add_argument("--out", type=Path, required=True, help="where to write solution.py")
    p.set_defaults(func=_cmd_extract)


def _cmd_extract(args: argparse.Namespace) -> int:
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


def _add_eval(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate one solution file on one problem (isolated; correctness checks, timing)",
        description="Evaluate SOLUTION (a file defining Model or ModelNew) on a problem: a trusted supervisor "
        "drives a fresh, sandboxed solution process over a data-only channel: correctness over several seeds, stress inputs and a second shape; "
        "anti-cheat checks; timing against the faster of eager and torch.compile.",
    )
    p.add_argument("--problem", required=True, help="problem id, e.g. level1/23_Softmax")
    p.add_argument("--solution", required=True, type=Path, help="solution file")
    p.add_argument(
        "--gpu",
        default="h100",
        type=gpu_name,
        help="GPU the result is reported for (speed of light): rtx3090, h100, b200, "
        "h200; the problem must be in that split",
    )
    p.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda when available, else cpu")
    p.add_argument(
        "--sizes",
        type=sizes_text,
        help="size overrides NAME=VALUE,... of the problem's size variables (CPU default: REDUCED_SIZES)",
    )
    p.add_argument("--tolerance", choices=["v3", "published", "strict"], default="v3")
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=600.0,
        help="seconds per step (import, each case, each timing batch) and per reference/baseline process",
    )
    p.add_argument(
        "--relax-kernel-check",
        action="store_true",
        help="let a solution without a custom kernel pass (the record says so)",
    )
    p.add_argument(
        "--kernel-rule",
        choices=["strict", "v3"],
        default="strict",
        help="strict (default): own kernels ran, no library GEMM/conv/attention, own kernels "
        "do the main work; v3: the published rule only (an own kernel ran)",
    )
    p.add_argument(
        "--no-source-scan",
        action="store_true",
        help="skip the static tamper scan (to study the other defences; the record says so)",
    )
    p.add_argument("--seeds", type=seeds, help="correctness seeds, e.g. 42,123 (default: 42,123,456,789,1337)")
    p.add_argument("--no-timing", action="store_true", help="correctness only")
    p.add_argument(
        "--timing-seconds",
        type=positive_seconds,
        help="timing budget per timed function (default: 15 on CUDA, 4 on CPU)",
    )
    p.add_argument("--no-baseline", action="store_true", help="do not time the reference")
    p.add_argument(
        "--retry-failed-baseline",
        action="store_true",
        help="re-time the baseline even if the cache holds a failure for it",
    )
    p.add_argument("--model", default="", help="model name recorded with the result")
    p.add_argument("--problems", type=problems_dir, help="problems folder (default: the bundled one)")
    p.add_argument("--cache", type=Path, help="baseline cache folder (default: ~/.cache/kbv3)")
    p.add_argument("--json", action="store_true", help="print the record as one JSON object, nothing else")
    p.set_defaults(func=_cmd_eval)


def _cmd_eval(args: argparse.Namespace) -> int:
    from ..evaluate import DEFAULT_SEEDS, EvalRequest, evaluate
    from ..evaluate.report import describe

    if not args.solution.is_file():
        raise CliError(f"argument --solution: file {args.solution} does not exist")
    sizes = check_eval_problem(args.problem, args.gpu, args.sizes, args.problems)
    if args.device == "cuda":
        check_cuda("--device cuda")
    try:
        request = EvalRequest(
            problem_id=args.problem,
            solution_path=args.solution,
            gpu=args.gpu,
            device=args.device or default_device(),
            sizes=sizes,
            timeout_s=args.timeout,
            tolerance=args.tolerance,
            require_custom_kernel=not args.relax_kernel_check,
            model=args.model,
            seeds=args.seeds or DEFAULT_SEEDS,
            time_solution=not args.no_timing,
            baseline=not args.no_baseline,
            retry_failed_baseline=args.retry_failed_baseline,
            timing_seconds=args.timing_seconds,
            kernel_rule=args.kernel_rule,
            scan_source=not args.no_source_scan,
        )
        record = evaluate(request, problems_dir=args.problems, cache_dir=args.cache)
    except (KeyError, ValueError, FileNotFoundError) as exc:
        print(f"kbv3 eval: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(record.to_json())
    else:
        print(describe(record))
    return 0 if record.correct else 1


def _add_eval_batch(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval-batch",
        help="evaluate a folder of solutions on every GPU (or a Ray cluster), resumably",
        description="Evaluate every solution under SOLUTIONS (laid out like problems/, or the runs "
        "dataset's <model>_<GPU>_<problem>.py.txt files). Each record is journaled as it "
        "finishes (<out>.journal.jsonl); rerunning the same command skips what is done.",
    )
    p.add_argument("solutions", type=Path, help="folder of solution files")
    p.add_argument("--split", required=True, choices=["rtx3090", "h100", "b200"])
    p.add_argument("--out", required=True, type=Path, help="Parquet file of records to write")
    p.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda when available, else cpu")
    p.add_argument("--gpus", type=gpu_indices, help="GPU indices for the workers, e.g. 0,1 (default: all visible)")
    p.add_argument("--workers", type=positive_int, default=1, help="worker processes on --device cpu")
    p.add_argument("--executor", choices=["local", "ray"], default="local")
    p.add_argument("--address", help="Ray cluster address (default: start Ray in-process)")
    p.add_argument(
        "--sizes",
        choices=["default", "reduced"],
        default="default",
        help="problem shapes: the files' own, or each problem's REDUCED_SIZES",
    )
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=300.0,
        help="seconds per step of one evaluation (import, each case, each timing batch)",
    )
    p.add_argument("--tolerance", choices=["v3", "published", "strict"], default="v3")
    p.add_argument(
        "--relax-kernel-check",
        action="store_true",
        help="let solutions without a custom kernel pass (e.g. references as solutions)",
    )
    p.add_argument(
        "--kernel-rule",
        choices=["strict", "v3"],
        default="strict",
        help="the custom-kernel rule (see `kbv3 eval --help`)",
    )
    p.add_argument("--seeds", type=seeds, help="correctness seeds, e.g. 42,123 (default: the evaluator's five)")
    p.add_argument(
        "--no-baseline",
        action="store_true",
        help="do not time the reference (no ref_ms / speedup): correctness screening",
    )
    p.add_argument(
        "--no-other-shape", action="store_true", help="check correctness at the batch's shapes only (no second shape)"
    )
    p.add_argument(
        "--timing-seconds",
        type=positive_seconds,
        help="timing budget per timed function (default: the evaluator's, 15 on CUDA)",
    )
    p.add_argument("--problems", type=problems_dir, help="problems folder (default: the bundled one)")
    p.add_argument("--model", help="model name for a problems/-style folder (default: its name)")
    p.add_argument("--journal", type=Path, help="journal path (default: <out>.journal.jsonl)")
    p.add_argument(
        "--retry-errors",
        action="store_true",
        help="also rerun journaled records whose status is 'error' (evaluator failures)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_eval_batch)


def _cmd_eval_batch(args: argparse.Namespace) -> int:
    import signal

    from ..batch.run import BatchError, BatchSettings, describe, run_batch

    # Every check before anything is created: a refused command leaves no Parquet or journal.
    if not args.solutions.is_dir():
        raise CliError(f"solutions folder {args.solutions} does not exist (or is not a folder)")
    if args.address and args.executor != "ray":
        raise CliError("argument --address: only used with --executor ray")
    device = check_gpus(args.device, args.gpus, args.executor)
    check_writable_parent(args.out, "--out")
    if args.journal is not None:
        check_writable_parent(args.journal, "--journal")

    def stop(signum, frame):  # SIGTERM: unwind so workers stop and the Parquet is written
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    options: dict = {"tolerance": args.tolerance, "kernel_rule": args.kernel_rule}
    if args.relax_kernel_check:
        options["require_custom_kernel"] = False
    if args.seeds:
        options["seeds"] = args.seeds
    if args.no_other_shape:
        options["other_shape"] = False
    if args.no_baseline:
        options["baseline"] = False
    if args.timing_seconds is not None:
        options["timing_seconds"] = args.timing_seconds
    settings = BatchSettings(
        split=args.split,
        device=device,
        sizes=args.sizes,
        timeout_s=args.timeout,
        problems_root=str(args.problems.resolve()) if args.problems else None,
        evaluator_options=tuple(sorted(options.items())),
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
        )
    except BatchError as exc:
        print(f"kbv3 eval-batch: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kbv3 eval-batch: interrupted; rerun the same command to finish", file=sys.stderr)
        return 130
    print(describe(result))
    return 0


def _add_build(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "build",
        help="write the Hub dataset folder: one Parquet file per GPU split and the card README.md",
        description="Build the Hugging Face dataset folder from a problems folder. Deterministic "
        "(same problems, same bytes) and all-or-nothing: a malformed problem file is reported "
        "and nothing is written.",
    )
    p.add_argument("out_dir", type=Path, help="folder to write (new or empty, unless --overwrite)")
    p.add_argument("--problems", type=problems_dir, help="problems folder (default: the bundled one)")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty OUT_DIR")
    p.add_argument("--no-prompts", action="store_true", help="leave out the per-split prompt column")
    p.set_defaults(func=_cmd_build)


def _cmd_build(args: argparse.Namespace) -> int:
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


def _add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="the main job on the bundled defaults: build the dataset, load a split back, "
        "evaluate the bundled example solutions",
    )
    p.add_argument("--out", type=Path, default=Path("out"), help="output folder (default: out)")
    p.add_argument("--split", default="h100", choices=["rtx3090", "h100", "b200"])
    p.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda when available")
    p.add_argument(
        "--all-examples", action="store_true", help="on CPU, evaluate every bundled example (about a minute each)"
    )
    p.set_defaults(func=_cmd_demo)


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    if args.device == "cuda":
        check_cuda("--device cuda")
    check_writable_parent(args.out / "records.jsonl", "--out")
    records = run_demo(args.out, split=args.split, device=args.device, all_examples=args.all_examples)
    return 0 if records and all(r["correct"] for r in records) else 1


def _add_runs(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("runs", help="published or local runs: leaderboard (summary) and anomaly flags")
    p.add_argument("action", choices=["summary", "anomalies"])
    p.add_argument(
        "--source",
        type=Path,
        help="results.csv, its folder, or Parquet/JSONL of evaluator records "
        "(default: the Hub dataset Infatoshi/kernelbench-v3-runs, needs network)",
    )
    p.add_argument("--problems", type=problems_dir, help="problems folder (default: the bundled one)")
    p.add_argument(
        "--no-facts",
        action="store_true",
        help="anomalies: skip the per-problem CPU facts (precision and near-identity flags)",
    )
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.set_defaults(func=_cmd_runs)


def _cmd_runs(args: argparse.Namespace) -> int:
    from ..runs.analysis import analyze_runs, flagged_runs, leaderboard, speedup_distribution
    from ..runs.load import RunsSchemaError, RunsSourceError, unmatched

    summary = args.action == "summary"
    try:
        joined, flags = analyze_runs(
            args.source, problems=args.problems, solutions=not summary, facts=not summary and not args.no_facts
        )
    except RunsSourceError as exc:
        raise CliError(str(exc)) from None
    except RunsSchemaError as exc:
        print(f"kbv3 runs: {exc}", file=sys.stderr)
        return 1
    missing = unmatched(joined)
    if summary:
        board, dist = leaderboard(joined), speedup_distribution(joined)
        if args.json:
            print(
                json.dumps(
                    {
                        "leaderboard": _records(board),
                        "speedup_distribution": _records(dist),
                        "unmatched": _records(missing),
                    },
                    indent=1,
                )
            )
            return 0
        for gpu, part in board.groupby("gpu", sort=False):
            print(f"\n== {gpu} ==")
            print(
                part.drop(columns=["gpu", "correct", "total"])
                .rename(columns={"correct_str": "correct"})
                .to_string(index=False, float_format=lambda v: f"{v:.3g}")
            )
        print("\n== speedup distribution (correct runs) ==")
        print(dist.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    else:
        runs = flagged_runs(joined, flags)
        if args.json:
            print(
                json.dumps(
                    {
                        "flags": _records(flags),
                        "flagged_runs": _records(runs.reset_index(names="run")),
                        "unmatched": _records(missing),
                    },
                    indent=1,
                )
            )
            return 0
        print(
            f"{len(runs)} flagged run(s) of {len(joined)}; flags: "
            + ", ".join(f"{k} {v}" for k, v in flags["flag"].value_counts().items() if v)
        )
        for row in flags.itertuples(index=False):  # each reason in full: it names the peak used
            print(
                f"run {row.run}  {row.model} / {row.gpu} / {row.problem}  speedup {row.speedup:.3g}x  "
                f"{row.flag}:\n    {row.reason}"
            )
    if len(missing):
        print(f"\n{len(missing)} run(s) match no catalog problem (kept, with null problem columns):")
        print(missing.to_string(index=False))
    return 0


def _records(frame) -> list:
    """A frame as JSON-safe records (NaN/NA -> null)."""
    return json.loads(frame.to_json(orient="records"))


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


VERBS = [
    _add_ls,
    _add_validate,
    _add_prompts,
    _add_extract,
    _add_eval,
    _add_eval_batch,
    _add_build,
    _add_demo,
    _add_runs,
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


def main(argv: list[str] | None = None) -> int:
    """Run one verb; a user's mistake gives one line on stderr and an exit code (EXIT_CODES)."""
    args = build_parser().parse_args(argv)
    verb = f"kbv3 {args.verb}"
    try:
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers, not at exit
        return code
    except CliError as exc:
        print(f"{verb}: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print(f"{verb}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return 141
    except OSError as exc:  # a folder that cannot be written, a disk that is full, ...
        where = f" {exc.filename}" if exc.filename else ""
        print(f"{verb}: cannot use{where}: {exc.strerror or exc}; check the path and its permissions", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
