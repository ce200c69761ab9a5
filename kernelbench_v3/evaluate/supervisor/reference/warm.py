"""References a long-lived supervisor keeps in memory between evaluations of one problem.

A batch worker evaluates many solutions in a row, most of them of the problem it last ran (the
work queue sees to that). An evaluation's reference - the models, the case inputs, the expected
outputs and their float64 facts - depends only on what `cache.key_fields` names (the
problem's bytes, sizes, case plan, device, torch), so the worker computes it once and reuses it.
It stays in the supervisor's memory, which no solution can read or write (solutions run in
processes of their own); on disk, expected outputs would be readable by the sandboxed solution.

Nothing in an evaluation writes to a `ReferenceRun`. A sampled checksum of every tensor it holds,
taken when it is kept and checked before reuse, would catch a mistake that did: the entry is
then dropped and the reference recomputed.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import torch

from .reference_run import ReferenceRun

_SAMPLES = 4096  # elements per tensor that the checksum reads
_kept: OrderedDict[str, tuple[ReferenceRun, float]] = OrderedDict()
_capacity = 0  # how many references to keep; 0 (off) outside long-lived supervisors


def keep_references_warm(count: int = 1) -> None:
    """Keep the last `count` references of this process in memory (a batch worker)."""
    global _capacity
    _capacity = max(0, int(count))
    while len(_kept) > _capacity:
        _kept.popitem(last=False)


def key_of(fields: Mapping[str, Any]) -> str:
    return json.dumps(fields, sort_keys=True)


def recall(key: str) -> ReferenceRun | None:
    """The kept reference for `key`, or None (not kept, or its checksum no longer matches)."""
    held = _kept.get(key)
    if held is None:
        return None
    run, checksum = held
    if sampled_checksum(run) != checksum:
        del _kept[key]
        return None
    _kept.move_to_end(key)
    return run


def remember(key: str, run: ReferenceRun) -> None:
    if _capacity <= 0:
        return
    _kept[key] = (run, sampled_checksum(run))
    _kept.move_to_end(key)
    while len(_kept) > _capacity:
        _kept.popitem(last=False)


def forget_all() -> None:
    _kept.clear()


def sampled_checksum(run: ReferenceRun) -> float:
    """A sum over evenly spaced elements of every tensor the run holds (models' state, case
    inputs, expected outputs): cheap, and changed by any whole-tensor in-place write."""
    total = 0.0
    tensors: list[torch.Tensor] = []
    for shape in run.shapes.values():
        tensors += list(shape.model.state_dict().values())
    for case in run.cases.values():
        tensors += [x for x in case.inputs if isinstance(x, torch.Tensor)]
        tensors += list(case.saved.values())
    for index, tensor in enumerate(tensors):
        flat = tensor.detach().reshape(-1)
        if flat.numel() == 0:
            continue
        step = max(1, flat.numel() // _SAMPLES)
        try:
            sample = flat[::step].to(torch.float64)
        except (RuntimeError, TypeError):  # a dtype without a conversion (packed fp4): its bytes
            sample = flat[::step].contiguous().view(torch.uint8).to(torch.float64)
        total += (index + 1) * float(torch.nan_to_num(sample).sum())
    return total
