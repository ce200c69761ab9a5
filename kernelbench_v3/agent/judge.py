"""The scoring path: judging an episode's solution exactly as `kbv3 eval-batch` judges a file.

Owns which file is judged and how. After `submit()`, the `solution.py` submitted; at the turn or
time limit, the newest version of `solution.py` that imports: versions are judged newest first,
and one whose judging fails before any case runs (the source scan or the import) gives way to
the one before it, up to `MAX_TRIED` versions (an empty file never imports; when none does, the
newest one's judging stands). Only judging records decide this; nothing `check()` reported is read.

Each judging is eval-batch's own evaluation of one item (`batch.items.evaluate_item`: the
trusted evaluator, every check, full timing, the file's sizes on CUDA and the reduced sizes on
the CPU) with its options' seeds replaced by secret ones, drawn fresh from the operating
system for each judging and never shown to the model; the record logs them, as every record does.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..batch.items import evaluate_item
from ..batch.queue import BatchItem, BatchSettings
from ..evaluate import DEFAULT_SEEDS, EvalOptions
from .check import PUBLIC_SEEDS, sha256_text, version_file

MAX_TRIED = 3  # versions judged at a limit before the newest one's judging stands
# Failing one of these means the file never ran: the version "does not import".
BEFORE_ANY_CASE = frozenset({"source_scan", "import"})

JudgeFn = Callable[[BatchItem, BatchSettings], dict[str, Any]]


def secret_seeds(count: int = len(DEFAULT_SEEDS)) -> tuple[int, ...]:
    """`count` distinct seeds from the OS's generator, none of them a public one."""
    rng = secrets.SystemRandom()
    chosen: list[int] = []
    while len(chosen) < count:
        seed = rng.randrange(1, 2**31 - 1)
        if seed not in chosen and seed not in PUBLIC_SEEDS:
            chosen.append(seed)
    return tuple(chosen)


@dataclass(frozen=True)
class JudgeSettings:
    """How an agent run's episodes are judged: eval-batch's settings for the run's split and device."""

    split: str
    device: str
    model: str
    problems_root: str | None = None
    options: EvalOptions = EvalOptions()  # everything but the seeds, which are drawn per judging

    def batch_settings(self, seeds: tuple[int, ...]) -> BatchSettings:
        options = dataclasses.replace(self.options, seeds=seeds)
        sizes = "reduced" if self.device == "cpu" else "default"  # eval-batch's --shapes default per device
        return BatchSettings(
            split=self.split,  # type: ignore[arg-type]
            device=self.device,  # type: ignore[arg-type]
            sizes=sizes,  # type: ignore[arg-type]
            problems_root=self.problems_root,
            options=options,
        )


@dataclass
class Judged:
    """The judging that scores an episode: its record and which version of solution.py it was."""

    record: dict[str, Any]
    solution_sha256: str
    text: str
    tried: list[str] = field(default_factory=list)  # sha256 of every version judged, newest first


def imported(record: dict[str, Any]) -> bool:
    return record.get("failed_check") not in BEFORE_ANY_CASE


def judge_one(
    problem_id: str, gpu: str, text: str, versions: Path, settings: JudgeSettings, judge_fn: JudgeFn | None = None
) -> dict[str, Any]:
    """One judging of `text` with fresh secret seeds; the record as a dict."""
    path = version_file(versions, text)
    item = BatchItem(settings.model, gpu, problem_id, str(path), sha256_text(text))
    record = (judge_fn or evaluate_item)(item, settings.batch_settings(secret_seeds()))
    return dict(record, model=settings.model)


def judge_episode(
    problem_id: str,
    gpu: str,
    newest_first: list[str],
    submitted: bool,
    versions: Path,
    settings: JudgeSettings,
    judge_fn: JudgeFn | None = None,
) -> Judged:
    """Judge the submitted version (`submitted`: the first of `newest_first`), or at a limit the
    newest that imports (see the module)."""
    candidates = newest_first[:1] if submitted else [t for t in newest_first if t.strip()][:MAX_TRIED]
    candidates = candidates or [newest_first[0] if newest_first else ""]
    first: Judged | None = None
    tried: list[str] = []
    for text in candidates:
        record = judge_one(problem_id, gpu, text, versions, settings, judge_fn)
        tried.append(sha256_text(text))
        judged = Judged(record, sha256_text(text), text, tried)
        if first is None:
            first = judged
        if submitted or imported(record):
            return judged
    assert first is not None
    return first
