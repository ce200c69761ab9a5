"""References a long-lived supervisor keeps in memory between evaluations of one problem.

A batch worker evaluates many solutions in a row, most of them of the problem it last ran (the
work queue sees to that); a service's requests may go round several problems (an agent working
on a few at once). An evaluation's reference - the models, the case inputs, the expected
outputs and their float64 facts - depends only on what `cache.key_fields` names (the
problem's bytes, sizes, case plan, device, torch), so the worker computes it once and reuses it.
It stays in the supervisor's memory, which no solution can read or write (solutions run in
processes of their own); on disk, expected outputs would be readable by the sandboxed solution.

The last reference is always kept; others stay while there are at most `count` in all and the
bytes they hold (`held_bytes`: on the device and on the host, each against a budget) fit: when
they do not, the largest goes first, so one 268 MB problem does not push out several small ones.

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

from ...protocol.channel import tensor_nbytes
from .reference_run import ReferenceRun

_SAMPLES = 4096  # elements per tensor that the checksum reads
# What the references other than the last may hold (bytes, beside it): on the device, where a
# solution process allocates from what is left (and at most DEVICE_BUDGET_SHARE of its memory:
# 0.6 GB of an RTX 3090's); on the host.
DEVICE_BUDGET_BYTES = 2 << 30
DEVICE_BUDGET_SHARE = 0.025
HOST_BUDGET_BYTES = 8 << 30
_kept: OrderedDict[str, tuple[ReferenceRun, float]] = OrderedDict()
_capacity = 0  # how many references to keep; 0 (off) outside long-lived supervisors
_budget = (DEVICE_BUDGET_BYTES, HOST_BUDGET_BYTES)


def keep_references_warm(
    count: int = 8, device_bytes: int = DEVICE_BUDGET_BYTES, host_bytes: int = HOST_BUDGET_BYTES
) -> None:
    """Keep up to `count` references of this process in memory (a batch worker, the service):
    the last one whatever its size, the others within `device_bytes` and `host_bytes`."""
    global _capacity, _budget
    _capacity = max(0, int(count))
    _budget = (int(device_bytes), int(host_bytes))
    _trim()


def held_bytes(run: ReferenceRun) -> tuple[int, int]:
    """The bytes of the run's tensors (models' state, case inputs, saved outputs): (on a device,
    on the host)."""
    device = host = 0
    for tensor in _tensors(run):
        n = tensor_nbytes(tensor)
        if tensor.device.type == "cpu":
            host += n
        else:
            device += n
    return device, host


def _device_budget() -> int:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
        return min(_budget[0], int(DEVICE_BUDGET_SHARE * total))
    return _budget[0]


def _trim() -> None:
    """Drop the oldest beyond `_capacity`, then the largest of those before the last while they
    hold more than the budget."""
    while len(_kept) > _capacity:
        _kept.popitem(last=False)
    while len(_kept) > 1:
        older = list(_kept)[:-1]
        sizes = {key: held_bytes(_kept[key][0]) for key in older}
        device, host = (sum(size[i] for size in sizes.values()) for i in (0, 1))
        if device <= _device_budget() and host <= _budget[1]:
            return
        del _kept[max(older, key=lambda key: sum(sizes[key]))]


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
    _trim()


def forget_all() -> None:
    _kept.clear()


def sampled_checksum(run: ReferenceRun) -> float:
    """A sum over evenly spaced elements of every tensor the run holds (models' state, case
    inputs, expected outputs): cheap, and changed by any whole-tensor in-place write."""
    total = 0.0
    for index, tensor in enumerate(_tensors(run)):
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


def _tensors(run: ReferenceRun) -> list[torch.Tensor]:
    """Every tensor the run holds: the models' state, the case inputs, the saved outputs."""
    tensors: list[torch.Tensor] = []
    for shape in run.shapes.values():
        tensors += list(shape.model.state_dict().values())
    for case in run.cases.values():
        tensors += [x for x in case.inputs if isinstance(x, torch.Tensor)]
        tensors += list(case.saved.values())
    return tensors
