"""Filling the baseline cache ahead of evaluations (`kbv3 baselines`): each problem's baseline got
exactly as an evaluation of it would get it (`baseline.request_baseline`, the same cache key), so
the evaluations that follow find it cached. Nothing of a solution runs here."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...request import DEFAULT_TIMING_SECONDS, EvalRequest
from .baseline import request_baseline


@dataclass(frozen=True)
class BaselineResult:
    problem_id: str
    entry: dict[str, Any]  # baseline.get_baseline's dict: baseline_ms, baseline_type, cached, error ...


def fill_baselines(
    problem_ids: Iterable[str],
    *,
    device: str = "cuda",
    problems_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    timing_seconds: float | None = None,
    retry_failed: bool = False,
) -> Iterator[BaselineResult]:
    """The baseline of each problem, from the cache or timed now and cached, in order."""
    from ....catalog.problem import default_problems_dir, get_problem

    root = Path(problems_dir) if problems_dir is not None else default_problems_dir()
    seconds = timing_seconds or DEFAULT_TIMING_SECONDS[device]
    for problem_id in problem_ids:
        problem = get_problem(problem_id, root)
        source = problem.path.read_bytes().decode("utf-8")
        sizes = dict(problem.reduced) if device == "cpu" and problem.reduced_sizes else {}
        request = EvalRequest(problem_id, problem.path, device=device, retry_failed_baseline=retry_failed)
        yield BaselineResult(problem_id, request_baseline(request, problem, source, sizes, cache_dir, seconds))
