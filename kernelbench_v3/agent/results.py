"""An agent run's results, rebuilt from its transcripts: the runs table, the records, the samples.

Owns turning each judged episode into:

- a row of `results.csv` in the published runs schema (`vocab.PUBLISHED_RUNS_COLUMNS`, exactly its
  columns): the judging record's runs columns, `turns` (model responses), `total_tokens`
  (summed from each response's `usage`), `estimated_cost_usd` (with both prices), `run_dir` (the
  transcript), `solution_link` (the judged file) and `baseline_link` (the reference, in the
  workspace). Prices given once are remembered
  (`prices.json`), so a rerun without them keeps the cost column. `sol_ms`, `ref_ms` and `speedup` are left
  empty where the judging's time is no performance figure (the CPU), as the schema has no
  column to say so;
- a line of `records.jsonl`: the full judging record plus those columns (`kbv3 report` reads it
  with every check and the timing's meaning);
- the samples layout in `solutions/` (`runs.sample_files`): one sample per problem, the judged
  file, so `kbv3 eval-batch RUN_DIR/solutions` re-judges the same files.

Episodes not judged yet are left out of all three (a rerun finishes them); everything is
written atomically, so a reader never sees half a table.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from dataclasses import dataclass
from typing import Any

from ..paths import write_atomically
from ..runs.sample_files import SampleEntry, sample_file, write_manifest
from ..vocab import PUBLISHED_RUNS_COLUMNS
from .layout import RunLayout
from .settings import AgentError, AgentSettings
from .transcript import read_entries, state_of
from .workspace import REFERENCE


@dataclass(frozen=True)
class EpisodeResult:
    problem_id: str
    record: dict[str, Any]
    turns: int
    usage: dict[str, int]
    ended: str
    solution_text: str


def judged_episodes(layout: RunLayout) -> list[EpisodeResult]:
    """Every judged episode of the run, in problem order."""
    results = []
    for path in layout.transcripts():
        entries = read_entries(path)
        state = state_of(entries)
        if state.judged is None:
            continue
        pid = layout.problem_of(path)
        sha = state.judged["solution_sha256"]
        text = (layout.versions(pid) / f"{sha[:16]}.py").read_text(encoding="utf-8")
        results.append(
            EpisodeResult(pid, state.judged["record"], state.turns, dict(state.usage), state.judged["ended"], text)
        )
    return results


def runs_columns(result: EpisodeResult, layout: RunLayout, settings: AgentSettings) -> dict[str, Any]:
    """The agent's own columns of the runs schema for one episode."""
    return {
        "turns": result.turns,
        "total_tokens": int(result.usage.get("total_tokens", 0)),
        "estimated_cost_usd": settings.cost_usd(result.usage),
        "run_dir": layout.transcript(result.problem_id).relative_to(layout.root).as_posix(),
        "solution_link": f"{layout.solutions.name}/{sample_file(result.problem_id, 0)}",
        "baseline_link": (layout.workspace(result.problem_id) / REFERENCE).relative_to(layout.root).as_posix(),
    }


def runs_row(result: EpisodeResult, layout: RunLayout, settings: AgentSettings) -> dict[str, Any]:
    row = {**result.record, **runs_columns(result, layout, settings), "model": settings.model}
    if result.record.get("timing_meaningful") is not True:
        row.update(sol_ms=None, ref_ms=None, speedup=None)
    return {column: row.get(column) for column in PUBLISHED_RUNS_COLUMNS}


def _csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(PUBLISHED_RUNS_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buffer.getvalue()


def with_prices(layout: RunLayout, settings: AgentSettings) -> AgentSettings:
    """`settings` with the run's prices: the ones given now (remembered in prices.json), else
    the ones given last, so a rerun that finishes a few episodes keeps the cost column."""
    if settings.price_in is not None and settings.price_out is not None:
        write_atomically(
            layout.prices, json.dumps({"price_in": settings.price_in, "price_out": settings.price_out}) + "\n"
        )
        return settings
    if not layout.prices.is_file():
        return settings
    try:
        given = json.loads(layout.prices.read_text(encoding="utf-8"))
        return dataclasses.replace(settings, price_in=float(given["price_in"]), price_out=float(given["price_out"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise AgentError(
            f"{layout.prices}: not the prices kbv3 agent writes ({exc}); give --price-in and --price-out"
        ) from None


def write_results(layout: RunLayout, settings: AgentSettings) -> list[EpisodeResult]:
    """Rewrite results.csv, records.jsonl and solutions/ from the transcripts; the judged episodes."""
    settings = with_prices(layout, settings)
    results = judged_episodes(layout)
    if not results:
        return results
    rows = [runs_row(r, layout, settings) for r in results]
    write_atomically(layout.results_csv, _csv(rows))
    lines = []
    for result in results:
        record = {**result.record, **runs_columns(result, layout, settings), "model": settings.model, "sample": 0}
        record["ended"] = result.ended
        lines.append(json.dumps(record, allow_nan=False) + "\n")
    write_atomically(layout.records, "".join(lines))
    entries = []
    for result in results:
        name = sample_file(result.problem_id, 0)
        path = layout.solutions / name
        if not path.is_file() or path.read_text(encoding="utf-8") != result.solution_text:
            write_atomically(path, result.solution_text)
        entries.append(SampleEntry(result.problem_id, 0, name))
    write_manifest(layout.solutions, settings.model, settings.split, entries)
    return results
