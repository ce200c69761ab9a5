"""The fast loop's share of the per-problem tests.

A test run once per problem (60 of them) costs seconds when each instantiates and runs its
model. The full suite runs every problem; the fast loop (`-m "not slow"`) runs the first problem
of each category (level1..4, graphics, tile_specialized, cutile) plus any named in `also`, so a
change that breaks a whole category still fails there, and the rest are marked slow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest


def fast_sample(items: Iterable[Any], problem_id: Callable[[Any], str] = str, also: Iterable[str] = ()) -> list:
    """`items` as pytest params (id: the problem id): the first of each category and those whose
    id starts with one of `also` unmarked, the others marked slow."""
    also = tuple(also)
    seen: set[str] = set()
    params = []
    for item in sorted(items, key=problem_id):
        pid = problem_id(item)
        category = pid.split("/", 1)[0]
        fast = category not in seen or (bool(also) and pid.startswith(also))
        seen.add(category)
        params.append(pytest.param(item, id=pid, marks=() if fast else pytest.mark.slow))
    return params
