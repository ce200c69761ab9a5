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


def test_the_baseline_is_timed_on_cuda_and_on_the_cpu_only_when_asked():
    """Issue 33, item 2: a CPU speedup is never given, so the CPU times no baseline by default."""
    from kernelbench_v3.cli.main import build_parser
    from kernelbench_v3.cli.options import eval_options_from
    from kernelbench_v3.evaluate import EvalOptions, EvalRequest

    assert EvalRequest("p", "s", device="cuda").wants_baseline
    assert not EvalRequest("p", "s", device="cpu").wants_baseline
    assert EvalRequest("p", "s", device="cpu", baseline=True).wants_baseline
    assert not EvalRequest("p", "s", device="cuda", baseline=False).wants_baseline
    assert EvalOptions().baseline is None and EvalOptions().changed() == {}
    base = ["eval", "--problem", "level1/23_Softmax", "--solution", "s.py", "--device", "cpu"]
    parse = build_parser().parse_args
    assert eval_options_from(parse(base)).request("p", "s", gpu="h100", device="cpu").wants_baseline is False
    assert eval_options_from(parse([*base, "--baseline"])).baseline is True
    assert eval_options_from(parse([*base, "--no-baseline"])).baseline is False
