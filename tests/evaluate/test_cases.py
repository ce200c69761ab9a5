"""The test cases: rerandomised weights, the case plan, input transforms, other shapes."""

from __future__ import annotations

import json

import torch

from kernelbench_v3.catalog.problem import get_problem
from kernelbench_v3.evaluate import cases


def test_rerandomize_changes_constant_and_random_tensors_keeps_counters():
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.LayerNorm(4), torch.nn.BatchNorm1d(4))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    cases.rerandomize(model)
    after = model.state_dict()
    for key in ("0.weight", "1.weight", "1.bias", "2.weight", "2.running_var"):
        assert not torch.equal(before[key], after[key]), key
    assert (after["2.running_var"] > 0).all()
    assert torch.equal(before["2.num_batches_tracked"], after["2.num_batches_tracked"])
    again = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.LayerNorm(4), torch.nn.BatchNorm1d(4))
    again.load_state_dict(before)
    cases.rerandomize(again)
    assert all(torch.equal(after[k], v) for k, v in again.state_dict().items())  # deterministic


def test_rerandomize_leaves_non_persistent_buffers_alone():
    class Rope(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)
            self.register_buffer("inv_freq", torch.arange(1.0, 5.0), persistent=False)

    model = Rope()
    cases.rerandomize(model)
    assert torch.equal(model.inv_freq, torch.arange(1.0, 5.0))


def test_plan_inputs_transforms_and_precision():
    plan = cases.plan_cases((42, 123, 456), other_shape=True)
    groups = [c.group for c in plan]
    assert groups == ["correctness"] * 3 + ["input_reuse", "stress", "stress", "recompute", "other_shape"]
    assert [c.float64 for c in plan] == [True, True, False, False, True, True, False, True]
    assert all(cases.Case.from_dict(json.loads(json.dumps(c.to_dict()))) == c for c in plan)
    x = torch.randn(4, 4)
    scaled, idx = cases.apply_transform([x, torch.arange(3)], (3.0, 0.0))
    assert torch.allclose(scaled, 3 * x) and torch.equal(idx, torch.arange(3))
    assert cases.input_precision([torch.zeros(1, dtype=torch.bfloat16)]) == "bf16"
    assert cases.input_precision([3, torch.zeros(1)]) == "fp32"


def test_other_shape_candidates_start_with_reduced_then_irregular():
    problem = get_problem("level1/23_Softmax")
    at_default = cases.other_shape_candidates(problem, {})
    assert at_default[0] == problem.reduced
    at_reduced = cases.other_shape_candidates(problem, problem.reduced)
    assert at_reduced[0] == {"batch_size": 24, "dim": 1536}
    assert all(c != problem.reduced for c in at_reduced)


def test_inputs_are_drawn_where_the_reference_runs():
    """On the CPU a case's inputs come from the CPU generator, as published; on another device
    ("meta" stands for a GPU here) its factory calls run there and the CPU generator is untouched:
    the CPU's draw of a 268 MB input costs about a second per case."""
    from kernelbench_v3.catalog.materialize import load_module

    problem = get_problem("level1/23_Softmax")
    module = load_module(problem.path, problem.reduced)
    case = cases.Case("stress_scaled", cases.STRESS, "main", 42, transform=(3.0, 0.0))

    def cpu_state_after(device):
        inputs = cases.build_inputs(module, case, device)
        return inputs, torch.get_rng_state()

    torch.manual_seed(case.seed)
    untouched = torch.get_rng_state()
    on_meta, state = cpu_state_after("meta")
    assert all(x.device.type == "meta" for x in on_meta if isinstance(x, torch.Tensor))
    assert torch.equal(state, untouched)
    on_cpu, state = cpu_state_after("cpu")
    assert not torch.equal(state, untouched)
    assert [tuple(x.shape) for x in on_cpu] == [tuple(x.shape) for x in on_meta]
