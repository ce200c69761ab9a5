"""`EvalRequest`: the frozen unit of work, normalised and validated."""

from __future__ import annotations

import pytest

from kernelbench_v3.evaluate import EvalRequest


def test_request_normalizes_and_validates():
    r = EvalRequest("level1/23_Softmax", "x.py", sizes={"dim": 8, "batch_size": 2}, device="cpu", seeds=[1, 2])
    assert r.sizes == (("batch_size", 2), ("dim", 8)) and r.seeds == (1, 2)
    assert hash(r) == hash(
        EvalRequest("level1/23_Softmax", "x.py", sizes=[("batch_size", 2), ("dim", 8)], device="cpu", seeds=(1, 2))
    )
    with pytest.raises(ValueError, match="device"):
        EvalRequest("p", "x.py", device="tpu")
    with pytest.raises(ValueError, match="tolerance"):
        EvalRequest("p", "x.py", tolerance="loose")
