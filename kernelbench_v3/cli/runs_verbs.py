"""`kbv3 runs`: the leaderboard (summary) and anomaly flags of published or local runs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .args import CliError
from .flags import add_json, add_problems


def add_runs(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "runs",
        help="published or local runs: leaderboard (summary) and anomaly flags",
        description="The runs dataset (the Hub's results.csv, or a local source): `kbv3 runs summary` prints "
        "the leaderboard per GPU and model, `kbv3 runs anomalies` the runs flagged as doubtful with a reason "
        "each. `kbv3 runs ACTION --help` says what each prints and takes.",
    )
    actions = p.add_subparsers(dest="action", required=True)
    summary = actions.add_parser(
        "summary",
        help="the leaderboard per GPU and model, and the speedup distribution",
        description="The leaderboard per GPU and model: correct/split (problems with a correct run of the "
        "problems in that GPU's split), problems attempted, the geometric-mean speedup over correct runs, "
        "fast_0..fast_2 (the share of the split's problems correct with a speedup above p), the mean and "
        "median fraction of the speed of light reached, cost; then the speedup distribution per level. "
        "--json: {leaderboard, speedup_distribution, unmatched}.",
    )
    anomalies = actions.add_parser(
        "anomalies",
        help="runs flagged as doubtful (faster than light, above the roofline, ...), each with its reason",
        description="Every flagged run with its reason: faster than the GPU's speed of light, above the "
        "roofline headroom, lower precision than the reference, no custom kernel in the solution source, "
        "near-identity problems, per-problem statistical outliers. A run is named by its row of the "
        "source (row 1 = the first data row of a results.csv) and its run_dir where the source has one. "
        "--json: {flags, flagged_runs, unmatched}.",
    )
    for action in (summary, anomalies):
        action.add_argument(
            "--source",
            type=Path,
            help="results.csv, its folder, or Parquet/JSONL of evaluator records "
            "(default: the Hub dataset Infatoshi/kernelbench-v3-runs, needs network)",
        )
        add_problems(action)
        add_json(action)
        action.set_defaults(func=cmd_runs, no_facts=False)
    anomalies.add_argument(
        "--no-facts",
        action="store_true",
        help="skip the per-problem CPU facts (the precision and near-identity flags)",
    )


def cmd_runs(args: argparse.Namespace) -> int:
    from ..runs.anomalies import analyze_runs, flagged_runs
    from ..runs.leaderboard import BOARD_NOTE, display_board, leaderboard, speedup_distribution
    from ..runs.load import RunsSchemaError, RunsSourceError, unmatched

    summary = args.action == "summary"
    try:
        joined, flags = analyze_runs(
            args.source, problems=args.problems, solutions=not summary, facts=not summary and not args.no_facts
        )
    except RunsSourceError as exc:
        raise CliError(exc.worded_for("--source")) from None
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
                display_board(part)
                .drop(columns=["gpu"])
                .to_string(index=False, na_rep="n/a", float_format=lambda v: f"{v:.3g}")
            )
        print(f"\n{BOARD_NOTE}")
        print("\n== speedup distribution (correct runs) ==")
        if dist.empty:
            print("no correct run has a speedup (timed on the CPU, or without a baseline): no distribution")
        else:
            print(dist.to_string(index=False, na_rep="n/a", float_format=lambda v: f"{v:.3g}"))
        cpu = int((~joined["timing_meaningful"].astype(bool)).sum()) if "timing_meaningful" in joined.columns else 0
        if cpu:
            print(
                f"\n{cpu} record(s) timed on the CPU: speedup n/a on CPU (interpreter timing tests the "
                "machinery), so they count for correctness only"
            )
    else:
        runs = flagged_runs(joined, flags)
        if args.json:
            print(
                json.dumps(
                    {
                        "flags": _records(flags.assign(row=flags["run"].map(_row_number))),
                        "flagged_runs": _records(
                            runs.reset_index(names="run").assign(row=lambda f: f["run"].map(_row_number))
                        ),
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
                f"{_run_name(joined, row.run)}  {row.model} / {row.gpu} / {row.problem}  "
                f"speedup {_speedup_text(row.speedup)}  {row.flag}:\n    {row.reason}"
            )
    if len(missing):
        print(f"\n{len(missing)} run(s) match no catalog problem (kept, with null problem columns):")
        print(missing.to_string(index=False))
    return 0


def add_report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="evaluator records as a table: problem, status, failed check and reason, time, speedup, SOL",
        description="Print RESULTS (eval-batch Parquet or JSONL, the demo's records.jsonl, one "
        "`kbv3 eval --json` object, or a published results.csv) as a per-problem table: problem, the split "
        "and the device it ran on, status, the failed check and its reason, the scored time, the speedup, "
        "the fraction of the speed of light reached and the row's anomaly flags (n/a: no such figure). "
        "--html OUT also writes a self-contained page of the table with the leaderboard and its figures. "
        "--json prints one object of data (numbers or null, never display text): `models` (per model: "
        "samples, problems, pass@k, fast_p@k, ...), `problems` (per model and problem) and `records` (one "
        "per record); its schema is kernelbench_v3/runs/report.schema.json.",
    )
    p.add_argument(
        "results", type=Path, help="records file (.parquet, .jsonl or .json) or a published runs table (.csv)"
    )
    p.add_argument("--html", type=Path, metavar="OUT", help="also write a self-contained HTML page to OUT")
    add_problems(p)
    machine = p.add_mutually_exclusive_group()
    add_json(machine)
    machine.add_argument("--csv", action="store_true", help="print the per-model summary as CSV instead")
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from ..runs.load import RunsSchemaError, RunsSourceError
    from ..runs.report import load_report, report_data, report_parts, report_text
    from ..runs.report_html import html_page
    from .args import check_writable_parent

    if not args.results.is_file():
        what = "is a folder, not a file" if args.results.is_dir() else "does not exist"
        raise CliError(f"results file {args.results} {what} (give eval-batch's --out, or a records .jsonl)")
    if args.html is not None:
        check_writable_parent(args.html, "--html")
    try:
        runs, joined, flags = load_report(args.results, args.problems)
    except RunsSourceError as exc:
        raise CliError(str(exc)) from None
    except RunsSchemaError as exc:
        print(f"kbv3 report: {exc}", file=sys.stderr)
        return 1
    from ..runs import pass_at_k

    # The page is written before anything is printed: a path that cannot be written fails with
    # nothing on stdout, never after a full table.
    if args.html is not None:
        page = html_page(runs, joined, title=f"kbv3 report: {args.results.name}", flags=flags)
        args.html.parent.mkdir(parents=True, exist_ok=True)
        args.html.write_text(page, encoding="utf-8")
    if args.json:
        # allow_nan=False: a NaN that slipped through is a bug to see, never invalid JSON printed.
        print(json.dumps(report_data(runs, joined, flags), indent=1, allow_nan=False))
    elif args.csv:
        print(pass_at_k.summaries_csv(report_parts(runs, joined, flags)["summaries"]), end="")
    else:
        # The summary per model and GPU, the per-problem table (where a problem has several
        # samples), then every record, each problem's best sample first: the page's order.
        print(report_text(runs, joined, flags))
    if args.html is not None:
        print(f"wrote {args.html}", file=sys.stderr if args.json or args.csv else sys.stdout)  # stdout stays parseable
    return 0


def _row_number(run) -> int:
    """A run's row of its source as a person counts it: 1 is the first data row (the frame's
    index is 0-based, the header of a results.csv is no row)."""
    return int(run) + 1


def _run_name(joined, run) -> str:
    """`row 6 (run_dir run_fixture_rtx3090)`: where a flagged run is in the source, by the row a
    person counts and, where the source has one, the run's own folder name."""
    run_dir = joined.at[run, "run_dir"] if "run_dir" in joined.columns else None
    where = f" (run_dir {run_dir})" if isinstance(run_dir, str) and run_dir else ""
    return f"row {_row_number(run)}{where}"


def _speedup_text(value) -> str:
    """`2.5x`, or `n/a` where the run has no speedup (timed on the CPU, incorrect, no baseline)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "n/a"
    return "n/a" if number != number else f"{number:.3g}x"


def _records(frame) -> list:
    """A frame as JSON-safe records (NaN/NA -> null)."""
    return json.loads(frame.to_json(orient="records"))
