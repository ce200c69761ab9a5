"""An agent run: one episode per problem of a split, a bounded number at a time, then the results.

Owns the run's guarantees. Before anything is sent, every problem is checked to be in the split
and every existing transcript to have been started under the same settings (else `AgentError`
names the problem and the field); on the CPU, a problem whose reference cannot run there
(`CPU_UNSUPPORTED`) is skipped and listed, since no check of it could pass. Episodes run on `concurrency` daemon threads (their model
requests overlap); their evaluations run one at a time on the calling thread (`desk`). Rerunning
the same command continues: a judged episode makes no request, an unfinished one resumes from
its transcript. After the episodes (after Ctrl-C too) the results are rewritten from the
transcripts (`results`). An endpoint that refuses every request (no tools, the key) stops every
episode (`EndpointRefused`).
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..batch.journal import JournalError, read_journal
from ..catalog.problem import Problem
from ..generate.client import ChatClient
from ..generate.run import GenerateError, choose_problems
from .check import EvaluateFn
from .desk import Desk
from .episode import EndpointRefused, EpisodeContext, EpisodeOutcome, run_episode
from .judge import JudgeFn
from .layout import RunLayout
from .results import EpisodeResult, with_prices, write_results
from .settings import AgentError, AgentSettings


@dataclass
class AgentResult:
    run_dir: Path
    outcomes: list[EpisodeOutcome]  # this invocation's, one per problem
    results: list[EpisodeResult]  # every judged episode of the run folder
    refused: str = ""  # the endpoint refuses every request (no tools, the key): the one line to print
    errors: list[str] = field(default_factory=list)  # episodes that raised (a bug, a lock in use)
    skipped: list[EpisodeOutcome] = field(default_factory=list)  # on the CPU, problems that cannot run there

    @property
    def unfinished(self) -> list[EpisodeOutcome]:
        return [o for o in self.outcomes if o.status not in ("judged", "already judged")]

    @property
    def all_correct(self) -> bool:
        wanted = {o.problem_id for o in self.outcomes}
        correct = {r.problem_id for r in self.results if r.record.get("correct")}
        return not self.unfinished and not self.errors and wanted <= correct


def check_transcripts(problems: list[Problem], settings: AgentSettings, layout: RunLayout) -> None:
    """AgentError naming the first transcript started under other settings, before any request."""
    for problem in problems:
        path = layout.transcript(problem.problem_id)
        try:
            header, _, _ = read_journal(path)
        except JournalError as exc:
            raise AgentError(str(exc)) from None
        if header is None:
            continue
        wanted = settings.header(problem)
        differ = {k: (header["settings"].get(k), v) for k, v in wanted.items() if header["settings"].get(k) != v}
        if differ:
            fields = ", ".join(f"{k}: {old!r} then, {new!r} now" for k, (old, new) in differ.items())
            raise AgentError(
                f"{path} was started under other settings ({fields}); use another --out or the same settings"
            )


def run_agent(
    settings: AgentSettings,
    run_dir: Path | str,
    client: ChatClient,
    concurrency: int = 1,
    progress: bool = True,
    clock: Callable[[], float] = time.monotonic,
    evaluate_fn: EvaluateFn | None = None,
    judge_fn: JudgeFn | None = None,
) -> AgentResult:
    """Run every episode of `settings` into `run_dir` (see the module)."""
    layout = RunLayout(Path(run_dir))
    try:
        problems = choose_problems(settings.split, settings.problems, settings.problems_root)
    except GenerateError as exc:
        raise AgentError(str(exc)) from None
    skipped = [
        EpisodeOutcome(p.problem_id, "skipped", 0, 0, detail=f"cannot run on the CPU: {p.cpu_unsupported}")
        for p in problems
        if settings.device == "cpu" and p.cpu_unsupported
    ]
    problems = [p for p in problems if not (settings.device == "cpu" and p.cpu_unsupported)]
    check_transcripts(problems, settings, layout)
    settings = with_prices(layout, settings)  # a damaged prices.json is found before any request
    desk = Desk(clock)
    ctx = EpisodeContext(settings, layout, client, desk, clock=clock, evaluate_fn=evaluate_fn, judge_fn=judge_fn)
    outcomes: dict[str, EpisodeOutcome] = {}
    errors: list[str] = []
    refused: list[str] = []
    work: queue.Queue = queue.Queue()
    for problem in problems:
        work.put(problem)

    def worker() -> None:
        while not ctx.stop.is_set():
            try:
                problem = work.get_nowait()
            except queue.Empty:
                return
            try:
                outcomes[problem.problem_id] = run_episode(ctx, problem)
            except EndpointRefused as exc:
                refused.append(client.scrub(str(exc)))
                ctx.stop.set()
                desk.close()
            except Exception as exc:  # noqa: BLE001 - one episode's defect never loses the others
                errors.append(client.scrub(f"{problem.problem_id}: {type(exc).__name__}: {exc}"))

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, min(concurrency, len(problems))))]
    bar = _Bar(len(problems), progress, outcomes)
    try:
        for thread in threads:
            thread.start()
        desk.serve(until=lambda: bar.update() or not any(t.is_alive() for t in threads))
    except KeyboardInterrupt:
        ctx.stop.set()
        desk.close()
        raise
    finally:
        bar.close()
        results = write_results(layout, settings)
    ordered = [outcomes[p.problem_id] for p in problems if p.problem_id in outcomes]
    return AgentResult(layout.root, ordered, results, refused[0] if refused else "", errors, skipped)


class _Bar:
    """The progress bar over episodes: finished ones, their turns and tokens."""

    def __init__(self, total: int, enabled: bool, outcomes: dict[str, EpisodeOutcome]):
        from tqdm import tqdm

        self._outcomes, self._shown = outcomes, 0
        self._bar = tqdm(total=total, desc="agent", unit="episode", disable=not enabled, file=sys.stderr)

    def update(self) -> None:
        done = len(self._outcomes)
        if done != self._shown:
            values = list(self._outcomes.values())
            self._bar.set_postfix(
                turns=sum(o.turns for o in values), tokens=sum(o.tokens for o in values), refresh=False
            )
            self._bar.update(done - self._shown)
            self._shown = done

    def close(self) -> None:
        self.update()
        self._bar.close()


def describe(result: AgentResult) -> str:
    """A short human summary: one line per episode, then the run's totals."""
    by_problem = {r.problem_id: r for r in result.results}
    lines = []
    for outcome in result.outcomes:
        judged = by_problem.get(outcome.problem_id)
        if judged is None:
            lines.append(
                f"{outcome.problem_id}: {outcome.status} ({outcome.detail}); rerun the same command to continue"
            )
            continue
        record = judged.record
        verdict = "correct" if record.get("correct") else f"{record.get('status')} ({record.get('failed_check')})"
        speedup = record.get("speedup")
        figure = f", speedup {speedup:.3g}x" if isinstance(speedup, (int, float)) else ""
        lines.append(
            f"{outcome.problem_id}: {verdict}{figure} after {judged.turns} turns, "
            f"{judged.usage.get('total_tokens', 0)} tokens ({judged.ended}{', judged before' if outcome.status == 'already judged' else ''})"
        )
    lines.extend(f"{o.problem_id}: skipped, {o.detail}" for o in result.skipped)
    lines.extend(f"error: {e}" for e in result.errors)
    counts = Counter("correct" if r.record.get("correct") else "not correct" for r in result.results)
    lines.append(
        f"{len(result.results)} judged episodes in {result.run_dir} ({', '.join(f'{n} {k}' for k, n in sorted(counts.items())) or 'none'}); "
        f"results.csv, records.jsonl and solutions/ rewritten"
    )
    return "\n".join(lines)
