"""Fresh input sets for the timing loop: blends, buffer rotation, the memory cap."""

from __future__ import annotations

import pytest
import torch

from kernelbench_v3.evaluate import cases
from kernelbench_v3.evaluate import fresh as F


def test_near_duplicate_swaps_two_elements_and_blends_keep_shared_structure():
    x = torch.randn(6, 10)
    near = [x.clone(), torch.arange(4)]
    cases.swap_two(near, 42)
    changed = (near[0] != x).nonzero()
    assert len(changed) == 2 and changed[0, 0] == changed[1, 0]  # one row, two elements
    assert abs(float(near[0].double().sum() - x.double().sum())) < 1e-9 and torch.equal(
        near[0].sort().values, x.sort().values
    )
    # Blends keep what all sets share (zeros, -inf, nonnegativity) and change every other value.
    mask = torch.tensor([[0.0, float("-inf")] * 5] * 6)
    a, b = [torch.rand(6, 10) + mask, torch.arange(4)], [torch.rand(6, 10) + mask, torch.arange(4) + 9]
    fresh = F.FreshInputs([a], b, a)
    seen = set()
    for _ in range(50):
        y = fresh.next()
        assert torch.equal(y[1], a[1]) and torch.isneginf(y[0][:, 1::2]).all() and (y[0][:, ::2] >= 0).all()
        key = y[0][:, ::2].numpy().tobytes()
        assert key not in seen and not torch.equal(y[0], a[0])
        seen.add(key)
    assert all(w != cases.FRESH_CHECK_WEIGHT and 0.2 <= w <= 0.8 for w in map(fresh.weight, range(1000)))


def test_fresh_inputs_rotate_over_buffer_sets_within_a_memory_cap():
    a, b = [torch.rand(8, 4)], [torch.rand(8, 4)]
    fresh = F.FreshInputs([a], b, a, buffers=3)
    used = [fresh.next()[0].data_ptr() for _ in range(6)]
    assert len(set(used)) == 3 and used[:3] == used[3:] and a[0].data_ptr() not in used
    assert F.buffer_count([torch.empty(1024)]) == F.MAX_FRESH_BUFFERS  # small inputs: the most sets
    assert F.buffer_count([torch.empty(F.FRESH_BUFFER_BYTES // 4 // 3)]) == 3  # within the memory cap
    assert F.buffer_count([torch.empty(F.FRESH_BUFFER_BYTES // 2)]) == 1  # big inputs: one set
    with pytest.raises(ValueError, match="buffer"):
        F.FreshInputs([a], b, a, buffers=0)
