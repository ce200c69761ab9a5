"""A generation run: every (problem, sample) of a split sent to a model, journaled, extracted.

Owns the run folder and its guarantees:

```
RUN_DIR/
  responses.jsonl   # the journal: a header with the run's settings, then one response a line
  solutions/        # the samples layout eval-batch reads (runs.sample_files)
```

Each response is appended to the journal (flushed and fsynced) the moment it arrives, by the
one thread that writes it, so Ctrl-C or a kill loses nothing that has arrived. Rerunning the
same command sends only what is missing: samples never sent, and samples whose request failed
(status "error": no answer came). An answer (code, no code, empty, refused) is final. A journal
only resumes under the settings that change answers (model, split, temperature, max tokens, the
template's text); `--samples`, `--problems` and `--concurrency` may change between runs.

After the requests (also after an interruption) every answered sample is extracted into
`solutions/`: one file per sample with code, and every sample listed in the manifest, those
without code with the reason.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..batch.journal import Journal, JournalError, read_journal
from ..catalog.problem import Problem, discover
from ..paths import write_atomically
from ..prompts.extract import ExtractionError, extract_solution
from ..prompts.render import TemplateError, template_digest, to_messages
from ..runs.sample_files import SampleEntry, sample_file, write_manifest
from ..vocab import Split, plural
from .client import ANSWERED, ChatClient, Reply, RequestParams

RESPONSES = "responses.jsonl"
SOLUTIONS = "solutions"


class GenerateError(ValueError):
    """A run that cannot start: a journal of other settings, one in use, an unknown problem."""


@dataclass(frozen=True)
class GenerateSettings:
    """What a run asks for. `problems` empty: the whole split."""

    split: Split
    model: str
    samples: int = 1
    temperature: float = 0.0
    max_tokens: int = 8192
    template: str = "default"
    problems: tuple[str, ...] = ()
    problems_root: str | None = None

    @property
    def params(self) -> RequestParams:
        return RequestParams(model=self.model, temperature=self.temperature, max_tokens=self.max_tokens)

    def to_dict(self) -> dict[str, Any]:
        """The journal header: the settings that change answers (a rerun must match them)."""
        return {
            "kind": "generate",
            "split": self.split,
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "template_sha256": template_digest(self.template),
        }


@dataclass
class GenerateResult:
    run_dir: Path
    sent: int  # requests this invocation completed
    already_done: int  # samples answered before this invocation
    statuses: Counter  # every sample of the run by reply status
    tokens: int  # tokens this invocation used
    with_code: int  # samples with a solution file
    without_code: list[SampleEntry] = field(default_factory=list)
    retried: int = 0  # requests of this invocation that needed more than one attempt (a 429 or 5xx)
    retries: int = 0  # the extra attempts they took

    @property
    def failed_requests(self) -> int:
        return self.statuses.get("error", 0)


def choose_problems(split: str, ids: tuple[str, ...] = (), root: str | None = None) -> list[Problem]:
    """The split's problems in catalog order, or those of `ids` (each must be in the split;
    GenerateError names the others, with the near matches, as `--only` gives them)."""
    in_split = discover(root, split=split)
    if not ids:
        return in_split
    by_id = {p.problem_id: p for p in in_split}
    missing = [pid for pid in ids if pid not in by_id]
    if missing:
        from ..catalog.problem import suggest_ids

        hints = []
        for pid in missing:
            near = suggest_ids(pid, by_id)
            hints.append(f"{pid} (did you mean {' or '.join(near)}?)" if near else pid)
        raise GenerateError(
            f"argument --only: not problems of split {split}: {', '.join(hints)} (`kbv3 ls --split {split}` lists them)"
        )
    return [p for p in in_split if p.problem_id in set(ids)]


def _record(pid: str, sample: int, settings: GenerateSettings, reply: Reply) -> dict[str, Any]:
    return {
        "problem_id": pid,
        "sample": sample,
        "model": settings.model,
        "split": settings.split,
        "params": {"temperature": settings.temperature, "max_tokens": settings.max_tokens},
        "status": reply.status,
        "text": reply.text,
        "finish_reason": reply.finish_reason,
        "usage": reply.usage,
        "latency_s": reply.latency_s,
        "attempts": reply.attempts,
        "reason": reply.reason,
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def latest_responses(records: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """One response per (problem, sample): an answer wins over an error, else the last one."""
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for record in records:
        key = (record["problem_id"], int(record["sample"]))
        if key in latest and latest[key].get("status") in ANSWERED and record.get("status") not in ANSWERED:
            continue
        latest[key] = record
    return latest


def run_generate(
    settings: GenerateSettings,
    run_dir: Path | str,
    client: ChatClient,
    concurrency: int = 4,
    progress: bool = True,
) -> GenerateResult:
    """Send every missing (problem, sample) of `settings`; journal and extract. See the module."""
    run_dir = Path(run_dir)
    try:
        problems = choose_problems(settings.split, settings.problems, settings.problems_root)
        book = Journal(run_dir / RESPONSES, settings)
        messages = {p.problem_id: to_messages(p, settings.split, settings.template) for p in problems}
    except TemplateError as exc:
        raise GenerateError(str(exc)) from None
    try:
        book.open()
    except JournalError as exc:
        raise GenerateError(str(exc).replace("--out/--journal", "RUN_DIR (--out)")) from None
    try:
        done = latest_responses(book.existing)
        todo = [
            (p.problem_id, s)
            for p in problems
            for s in range(settings.samples)
            if done.get((p.problem_id, s), {}).get("status") not in ANSWERED
        ]
        sent, tokens, retried, retries = 0, 0, 0, 0
        try:
            for record in _send_all(todo, messages, settings, client, concurrency, progress):
                book.append(record)  # durable before the next one is looked at
                done[(record["problem_id"], record["sample"])] = record
                sent += 1
                tokens += int(record["usage"].get("total_tokens") or 0)
                extra = int(record.get("attempts") or 1) - 1
                retried, retries = retried + (extra > 0), retries + max(extra, 0)
        finally:
            wanted = {(p.problem_id, s) for p in problems for s in range(settings.samples)}
            _, all_records, _ = read_journal(book.path)
            with_code, without = write_solutions(run_dir / SOLUTIONS, settings, latest_responses(all_records))
    finally:
        book.close()
    statuses = Counter(done[k]["status"] for k in wanted if k in done)
    return GenerateResult(
        run_dir=run_dir,
        sent=sent,
        already_done=len(wanted) - len(todo),
        statuses=statuses,
        tokens=tokens,
        with_code=with_code,
        without_code=without,
        retried=retried,
        retries=retries,
    )


def _send_all(todo, messages, settings: GenerateSettings, client: ChatClient, concurrency: int, progress: bool):
    """Yield one journal record per request as it completes, `concurrency` requests at a time.

    The senders are daemon threads: after Ctrl-C the generator is closed, senders take no new
    work, and a request still waiting on the server cannot hold the process open."""
    from tqdm import tqdm

    if not todo:
        return
    work: queue.Queue = queue.Queue()
    for item in todo:
        work.put(item)
    results: queue.Queue = queue.Queue()
    stop = threading.Event()

    def sender() -> None:
        while not stop.is_set():
            try:
                pid, sample = work.get_nowait()
            except queue.Empty:
                return
            try:
                reply = client.complete(messages[pid], settings.params)
            except Exception as exc:  # noqa: BLE001 - a sender never dies silently; the run records it
                reply = Reply("error", reason=client.scrub(f"client raised {type(exc).__name__}: {exc}"))
            results.put(_record(pid, sample, settings, reply))

    threads = [threading.Thread(target=sender, daemon=True) for _ in range(min(concurrency, len(todo)))]
    for thread in threads:
        thread.start()
    bar = tqdm(total=len(todo), desc="generate", unit="req", disable=not progress, file=sys.stderr, dynamic_ncols=True)
    tokens, failures = 0, 0
    try:
        for _ in range(len(todo)):
            record = results.get()
            tokens += int(record["usage"].get("total_tokens") or 0)
            failures += record["status"] != "ok"
            bar.set_postfix(tokens=tokens, failures=failures, refresh=False)
            bar.update(1)
            yield record
    finally:
        stop.set()
        bar.close()


def write_solutions(
    folder: Path, settings: GenerateSettings, responses: dict[tuple[str, int], dict[str, Any]]
) -> tuple[int, list[SampleEntry]]:
    """Extract every journaled sample into `folder` (one file per sample with code) and write the
    manifest listing them all; returns (files written, samples without a solution)."""
    entries: list[SampleEntry] = []
    for (pid, sample), record in sorted(responses.items()):
        entry = SampleEntry(pid, sample, None, _why_no_answer(record))
        if record.get("status") == "ok":
            try:
                solution = extract_solution(record.get("text") or "")
            except ExtractionError as exc:
                entry = SampleEntry(pid, sample, None, f"no solution in the response: {exc}")
            else:
                name = sample_file(pid, sample)
                write_atomically(folder / name, solution.code)
                entry = SampleEntry(pid, sample, name)
        entries.append(entry)
    folder.mkdir(parents=True, exist_ok=True)
    write_manifest(folder, settings.model, settings.split, entries)
    return sum(e.file is not None for e in entries), [e for e in entries if e.file is None]


def _why_no_answer(record: dict[str, Any]) -> str:
    status = record.get("status")
    reason = record.get("reason") or status
    return reason if status != "error" else f"request failed: {reason}"


def describe(result: GenerateResult) -> str:
    """A short human summary of a run."""
    counts = ", ".join(f"{n} {s}" for s, n in sorted(result.statuses.items()))
    lines = [
        f"{plural(sum(result.statuses.values()), 'sample')} ({counts}) in {result.run_dir}",
        f"sent {result.sent} now ({result.tokens} tokens), {result.already_done} already answered",
        f"solutions: {result.with_code} with code, {len(result.without_code)} without "
        f"in {result.run_dir / SOLUTIONS} (eval-batch reads this folder)",
    ]
    for entry in result.without_code[:20]:
        lines.append(f"  {entry.problem_id} sample {entry.sample}: {entry.reason.splitlines()[0][:200]}")
    if len(result.without_code) > 20:
        lines.append(f"  ... and {len(result.without_code) - 20} more (see solutions/samples.json)")
    if result.retried:
        lines.append(
            f"{plural(result.retried, 'request')} answered only after a retry "
            f"({plural(result.retries, 'retry', 'retries')}, after a 429 or 5xx; --retries sets how many)"
        )
    if result.failed_requests:
        lines.append(f"{result.failed_requests} request(s) failed: rerun the same command to send them again")
    return "\n".join(lines)
