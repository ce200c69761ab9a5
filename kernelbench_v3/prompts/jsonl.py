"""Prompt files for evaluation harnesses: one JSON object per problem of a split, one per line.

Owns the row shape `{"problem_id", "gpu", "messages", "prompt"}` (chat messages for chat
harnesses, the same content as one text for completion harnesses) and writing it atomically,
so an interrupted run never leaves a half-written file behind.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..catalog.problem import Problem, discover
from ..paths import write_atomically
from ..vocab import SPLITS
from .render import DEFAULT_TEMPLATE, messages_to_text, to_messages

ROW_FIELDS = ("problem_id", "gpu", "messages", "prompt")


def prompt_row(problem: Problem, gpu: str, template: str | Path = DEFAULT_TEMPLATE, one_shot: bool = False) -> dict:
    messages = to_messages(problem, gpu, template, one_shot)
    return {"problem_id": problem.problem_id, "gpu": gpu, "messages": messages, "prompt": messages_to_text(messages)}


def prompt_rows(
    gpu: str,
    template: str | Path = DEFAULT_TEMPLATE,
    one_shot: bool = False,
    problems: Iterable[Problem] | None = None,
    problems_dir: Path | str | None = None,
) -> Iterator[dict]:
    """One row per problem of the `gpu` split (all of them, or those given that belong to it)."""
    if gpu not in SPLITS:
        raise ValueError(f"unknown GPU split {gpu!r}; choose one of {', '.join(SPLITS)}")
    chosen = discover(problems_dir, split=gpu) if problems is None else [p for p in problems if gpu in p.gpus]
    for problem in chosen:
        yield prompt_row(problem, gpu, template, one_shot)


def write_jsonl(rows: Iterable[dict], out: Path | str) -> int:
    """Write rows as JSON lines to `out` (atomically, `paths.write_atomically`); returns the
    number of rows."""
    lines = [json.dumps(row, ensure_ascii=False) + "\n" for row in rows]
    write_atomically(Path(out), "".join(lines))
    return len(lines)
