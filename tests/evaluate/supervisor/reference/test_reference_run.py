"""The reference computed in the supervisor: TF32 rounding, where its saved tensors live."""

from __future__ import annotations

import torch

from kernelbench_v3.evaluate.supervisor.reference.reference_run import SavedPlace, _round_tf32


def test_tf32_truncation_keeps_ten_mantissa_bits():
    x = torch.tensor([1.0 + 2**-10, 1.0 + 2**-11 + 2**-12, -3.0000001, 0.0])
    r = _round_tf32(x)
    assert r[0] == 1.0 + 2**-10 and r[1] == 1.0 and r[2] == -3.0 and r[3] == 0.0  # toward zero
    assert torch.allclose(r, x, rtol=2**-10)


def test_saved_tensors_stay_on_the_device_while_they_fit_its_budget():
    """A GPU evaluation keeps expected outputs and residuals on the GPU ("meta" stands in for it
    here) up to a byte budget, the rest on the CPU; a CPU evaluation keeps everything there."""
    place = SavedPlace("meta", budget=100).place
    kept = [place(torch.zeros(16)), place(torch.zeros(16)), place(torch.zeros(8))]
    assert [t.device.type for t in kept] == ["meta", "cpu", "meta"]  # 64 + 32 bytes fit, 64 more do not
    on_cpu = SavedPlace("cpu", budget=1 << 30).place(torch.ones(4))
    assert on_cpu.device.type == "cpu" and torch.equal(on_cpu, torch.ones(4))
