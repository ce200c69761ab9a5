"""The reference computed in the supervisor: TF32 rounding."""

from __future__ import annotations

import torch

from kernelbench_v3.evaluate.supervisor.reference.reference_run import _round_tf32


def test_tf32_truncation_keeps_ten_mantissa_bits():
    x = torch.tensor([1.0 + 2**-10, 1.0 + 2**-11 + 2**-12, -3.0000001, 0.0])
    r = _round_tf32(x)
    assert r[0] == 1.0 + 2**-10 and r[1] == 1.0 and r[2] == -3.0 and r[3] == 0.0  # toward zero
    assert torch.allclose(r, x, rtol=2**-10)
