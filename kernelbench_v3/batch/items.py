"""One evaluation of a batch item, as a worker runs it, and the records a batch writes.

Owns turning a `BatchItem` into an evaluator call (`evaluate_item`), the guard that turns any
exception of it into an error record (`evaluate_safely`: a worker never dies of one), the record
of an evaluation that produced none (`failure_record`) and the batch's key fields stamped on a
record (`stamp`). Shared by the executors (`executors`, `ray_executor`) and the agent's judge.
Nothing here imports `torch`; the evaluator loads inside `evaluate_item`.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .discover import importable_path
from .queue import BatchItem, BatchSettings

if TYPE_CHECKING:
    from ..evaluate import GpuTurns

# (item, settings) -> record; a worker that shares its GPU also passes `turns=`.
EvaluateFn = Callable[..., dict[str, Any]]
OnRecord = Callable[[BatchItem, dict[str, Any], str], None]  # item, record, worker (e.g. "gpu0")


def evaluate_item(item: BatchItem, settings: BatchSettings, turns: GpuTurns | None = None) -> dict[str, Any]:
    """Run the evaluator on one item (inside a worker); returns the record as a dict. `turns`:
    the GPU's turns when another worker shares it (`gpu_share`)."""
    from ..catalog.problem import get_problem
    from ..evaluate import evaluate

    problem = get_problem(item.problem_id, settings.problems_root)
    sizes: dict[str, Any] = {}
    if settings.sizes == "reduced":
        sizes = problem.reduced
    elif settings.device == "cpu":
        # The evaluator reads no sizes on the CPU as "reduced": `--shapes default` there names
        # the file's own sizes, or it would be silently ignored. (On CUDA none means default.)
        sizes = dict(problem.sizes)
    request = settings.options.request(
        item.problem_id,
        importable_path(Path(item.solution_path)),
        gpu=settings.split,
        device=settings.device,
        sizes=sizes,
        model=item.model,
    )
    return evaluate(request, problems_dir=settings.problems_root, gpu_turns=turns).to_dict()


def failure_record(
    item: BatchItem, settings: BatchSettings, error: str, status: str = "error", check: str | None = None
) -> dict[str, Any]:
    """A record with status "error" for an evaluation that produced none (worker died, ...), or
    with `status` "failed" and `check` "response" for a sample that has no solution file."""
    from ..catalog.problem import get_problem
    from ..evaluate import Record, device_name

    record = Record(
        model=item.model,
        gpu=item.gpu,
        problem_id=item.problem_id,
        problem=item.problem_id.rsplit("/", 1)[-1] + ".py",
        solution_path=item.solution_path,
        solution_sha256=item.solution_sha256,
        device=settings.device,
        # Named as an evaluated record names it (`cpu:<model>`, the GPU's name), so a report's
        # "ran on" reads the same for the batch's failed and evaluated records.
        ran_on=device_name(settings.device),
    )
    try:
        problem = get_problem(item.problem_id, settings.problems_root)
        record.level, record.op_type = problem.level, problem.op_type
        record.problem_sha256 = problem.sha256
    except (KeyError, OSError, ValueError):
        pass
    return record.fail(status, error, check).to_dict()


def stamp(record: dict[str, Any], item: BatchItem) -> dict[str, Any]:
    """The record with the batch key fields taken from the item, so the journal's keys always
    match the batch's own (the record describes the file the batch discovered)."""
    record = dict(record)
    record.update(
        model=item.model,
        gpu=item.gpu,
        problem_id=item.problem_id,
        solution_sha256=item.solution_sha256,
        solution_path=item.solution_path,
    )
    if item.sample is not None:  # only in the samples layout: other batches' records keep their columns
        record["sample"] = item.sample
    return record


def evaluate_safely(
    evaluate_fn: EvaluateFn, item: BatchItem, settings: BatchSettings, turns: GpuTurns | None = None
) -> dict[str, Any]:
    """evaluate_fn, with any exception turned into an error record (a worker never dies of it);
    `turns` is passed on only to a worker that shares its GPU."""
    try:
        if turns is not None:
            return evaluate_fn(item, settings, turns=turns)
        return evaluate_fn(item, settings)
    except Exception:
        tail = traceback.format_exc(limit=8)[-2000:]
        return failure_record(item, settings, f"evaluator raised: {tail}")


__all__ = ["EvaluateFn", "OnRecord", "evaluate_item", "evaluate_safely", "failure_record", "stamp"]
