"""Batch evaluation: many solutions, durably recorded and resumable.

Owns what a batch is and how its results survive: finding the solutions of a batch in either
folder layout, the batch key `(model, gpu, problem_id, solution_sha256)`, resuming from the
journal (the durable JSONL file of records, owned by `journal`), ordering the work so that each
(problem, GPU) baseline is computed by one evaluation before others of that problem start (they
then find it in the evaluator's on-disk cache), and writing the Parquet output from the journal.
Running evaluations belongs to `executors` (local worker processes, two per GPU, or Ray tasks);
judging one solution belongs to `evaluate`.

Finding the solutions of a batch (three folder layouts) belongs to `discover`.

This module and everything it imports stay free of `datasets` (the GPU hosts lack it).
"""

from __future__ import annotations

import io
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..paths import write_atomically
from ..vocab import plural
from .discover import (  # noqa: F401 (defined there, imported from here too)
    RUNS_SUFFIX,
    BatchError,
    Skipped,
    SolutionSet,
    UnknownSolutionError,
    discover_samples,
    discover_solutions,
    parse_runs_name,
    select_problems,
    sha256_file,
    split_gpu,
)
from .journal import Journal, JournalError, Key, latest_records, read_journal, record_key  # noqa: F401
from .progress import Progress, Throughput
from .queue import BatchItem, BatchSettings, WorkQueue  # noqa: F401 (defined in work, imported from here too)

# ----------------------------------------------------------------------------- output


# Record fields holding dicts whose keys differ from row to row; Parquet gets them as JSON text
# so one odd row cannot break the file's schema. `read_results` decodes them again.
JSON_COLUMNS = (
    "sizes",
    "checks",
    "check_details",
    "timing_details",
    "fingerprint",
    "phase_s",
    "kernel_evidence",
    "sandbox_details",
    "wall_phase_s",
    "wall_background_s",
)
# JSON columns whose key order is their meaning (phases in the order they ran): kept, not sorted.
ORDERED_JSON_COLUMNS = ("phase_s", "wall_phase_s")


def write_parquet(records: Iterable[dict[str, Any]], out: Path | str) -> int:
    """Write records to `out` atomically (temp file + rename); returns the row count."""
    import pandas as pd

    rows = []
    for record in records:
        row = dict(record)
        for name in JSON_COLUMNS:
            if name in row:
                row[name] = json.dumps(row[name], sort_keys=name not in ORDERED_JSON_COLUMNS)
        rows.append(row)
    buffer = io.BytesIO()
    pd.DataFrame(rows).to_parquet(buffer, index=False)
    write_atomically(Path(out), buffer.getvalue())  # no temporary left behind on an error
    return len(rows)


def read_results(path: Path | str) -> list[dict[str, Any]]:
    """The records of a batch Parquet file, with JSON columns decoded back to dicts."""
    import pandas as pd

    frame = pd.read_parquet(path)
    records = []
    for row in frame.to_dict(orient="records"):
        for name in JSON_COLUMNS:
            if isinstance(row.get(name), str):
                row[name] = json.loads(row[name])
        records.append({k: _plain(v) for k, v in row.items()})
    return records


def _plain(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, float) and value != value:
        return None
    return value


# ----------------------------------------------------------------------------- running


@dataclass
class BatchResult:
    out: Path
    journal: Path
    records: list[dict[str, Any]]  # one per item of this batch, in batch order
    ran: int  # evaluations run by this invocation
    already_done: int  # items found in the journal and skipped
    skipped: list[Skipped]
    wall_s: float
    throughput: Throughput | None = None  # this run's evaluations per hour, per worker and in total
    left_out: int = 0  # solutions under the folder that `only` and `limit` left out of this batch

    def counts(self) -> Counter:
        return Counter(r.get("status", "?") for r in self.records)


def default_journal(out: Path | str) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".journal.jsonl")


def run_batch(
    solutions: Path | str,
    out: Path | str,
    settings: BatchSettings,
    *,
    executor: str = "local",
    gpus: list[int] | None = None,
    workers: int | None = None,
    address: str | None = None,
    journal: Path | str | None = None,
    model: str | None = None,
    retry_errors: bool = False,
    progress: bool = True,
    evaluate_fn: Callable[..., dict[str, Any]] | None = None,
    only: Iterable[str] | None = None,
    limit: int | None = None,
) -> BatchResult:
    """Evaluate every solution under `solutions` not yet in the journal; write `out` (Parquet).

    The journal (default `<out>.journal.jsonl`) gets each record the moment it is finished; the
    Parquet file is rewritten from it at the end, also after an interruption. Rerunning the
    same command skips what the journal holds; `retry_errors` also reruns records whose status
    is "error" (the evaluator or a worker failed, not the solution). `only` (problem ids) and
    `limit` (the first N problems) narrow the batch to those problems' solutions, every sample
    of each (`discover.select_problems`); the journal keeps what other batches finished.
    `workers`: on CUDA, worker processes per GPU (default 2: one's reference phase beside the
    other's solution, `executors`); on the CPU or under Ray, in all (default 1).
    """
    from . import executors, items

    started = time.monotonic()
    found = discover_solutions(solutions, settings.split, settings.problems_root, model)
    found, left_out = select_problems(found, settings.split, settings.problems_root, only=only, limit=limit)
    journal_path = Path(journal) if journal is not None else default_journal(out)
    book = Journal(journal_path, settings)
    try:
        book.open()
    except JournalError as exc:  # a batch that cannot start, like a bad solutions folder
        raise BatchError(str(exc)) from None
    try:
        done = latest_records(book.existing)
        redo = {k for k, r in done.items() if retry_errors and r.get("status") == "error"}
        todo = [it for it in found.items if it.key not in done or it.key in redo]
        warm = {(r["problem_id"], r["gpu"]) for r in done.values()}
        shown = Progress(len(todo) - sum(bool(it.missing) for it in todo), progress)
        queue = WorkQueue(
            [it for it in todo if not it.missing],
            warm,
            on_take=lambda item: shown.starting(item_label(item)),
            on_put_back=lambda item: shown.put_back(item_label(item)),
        )

        def on_record(item: BatchItem, record: dict[str, Any], worker: str = "") -> None:
            record = items.stamp(record, item)
            book.append(record)  # durable before this worker is handed its next item
            done[item.key] = record
            shown.record(record, worker, item_label(item))

        try:
            for item in [it for it in todo if it.missing]:  # a sample without code: failed, nothing to evaluate
                record = items.failure_record(item, settings, item.missing, "failed", "response")
                record = items.stamp(record, item)
                book.append(record)
                done[item.key] = record
            if not queue.finished():
                runner = executors.make_executor(
                    executor,
                    settings,
                    gpus=gpus,
                    workers=workers,
                    address=address,
                    evaluate_fn=evaluate_fn,
                )
                runner.run(queue, on_record)
        finally:
            throughput = shown.finish()
            write_parquet(latest_records(read_journal(journal_path)[1]).values(), out)
    finally:
        book.close()
    records = [done[it.key] for it in found.items if it.key in done]
    return BatchResult(
        out=Path(out),
        journal=journal_path,
        records=records,
        ran=throughput.evaluations,
        already_done=len(found.items) - len(todo),
        skipped=found.skipped,
        wall_s=time.monotonic() - started,
        throughput=throughput,
        left_out=left_out,
    )


def item_label(item: BatchItem) -> str:
    """How progress names an evaluation: `level1/23_Softmax sample 2 (model)`; the sample is
    what tells apart the evaluations of one problem's several samples."""
    sample = f" sample {item.sample}" if item.sample is not None else ""
    return f"{item.problem_id}{sample} ({item.model})" if item.model else f"{item.problem_id}{sample}"


def failure_line(record: dict[str, Any]) -> str:
    """`level1/23_Softmax sample 2 (model): incorrect, failed check correctness: <first line of the reason>`."""
    reason = str(record.get("error") or "").strip().splitlines()
    check = record.get("failed_check")
    sample = record.get("sample")
    sample_text = f" sample {int(sample)}" if isinstance(sample, (int, float)) and sample == sample else ""
    return (
        f"{record.get('problem_id')}{sample_text} ({record.get('model') or '(unnamed)'}): {record.get('status')}"
        + (f", failed check {check}" if check else "")
        + (f": {reason[0][:200]}" if reason else "")
    )


def describe_batch(result: BatchResult) -> str:
    """A short human summary of a finished batch."""
    counts = result.counts()
    parts = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    lines = [
        f"{plural(len(result.records), 'record')} ({parts}) in {result.out}",
        f"ran {result.ran} now, {result.already_done} already in {result.journal}; {result.wall_s:.1f}s",
    ]
    if result.throughput is not None and result.throughput.evaluations:
        lines.append(result.throughput.line())
    for record in result.records:  # each failure on one line: which one, and why
        if record.get("status") != "correct":
            lines.append("  " + failure_line(record))
    if result.left_out:
        lines.append(f"left out {result.left_out} solution(s) of other problems (--only / --limit)")
    if result.skipped:
        reasons = Counter(s.reason for s in result.skipped)
        lines.append(
            f"skipped {len(result.skipped)} file(s): " + "; ".join(f"{n}x {r}" for r, n in reasons.most_common(5))
        )
    return "\n".join(lines)
