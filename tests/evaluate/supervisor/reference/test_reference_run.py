"""The reference computed in the supervisor: TF32 rounding, where its large tensors live."""

from __future__ import annotations

import torch

from kernelbench_v3.evaluate.supervisor.reference.placement import HostCopies, SavedPlace
from kernelbench_v3.evaluate.supervisor.reference.reference_run import _round_tf32


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


def test_host_copies_are_page_locked_within_their_budget_then_pageable():
    """A GPU evaluation's host copies (case inputs for the arena, outputs read back from it) are
    page-locked while the budget lasts ("pinned" is injected: page-locking needs CUDA); past it,
    or once the driver refuses, pageable. Every copy shares nothing with its source."""
    pinned: list[torch.Tensor] = []

    def empty_pinned(t):
        pinned.append(torch.empty(t.shape, dtype=t.dtype))
        if len(pinned) == 3:
            raise RuntimeError("cudaHostAlloc: out of memory (a test's)")
        return pinned[-1]

    copies = HostCopies("cuda", budget=112, empty_pinned=empty_pinned)
    a, b, c, d = torch.arange(16.0), torch.arange(8.0), torch.arange(4.0), torch.arange(2.0)
    out = [copies.copy(a), copies.copy(b), copies.copy(a), copies.copy(c), copies.copy(d)]
    # a (64 B) and b (32 B) pinned; a again is over the 16 B left; c (16 B) fits, the driver refuses;
    # after a refusal nothing more is tried.
    assert [any(o is p for p in pinned) for o in out] == [True, True, False, False, False]
    assert len(pinned) == 3
    for o, src in zip(out, (a, b, a, c, d)):
        assert torch.equal(o, src) and o.data_ptr() != src.data_ptr()
    on_cpu = HostCopies("cpu", budget=1 << 30, empty_pinned=empty_pinned)
    assert (
        on_cpu.on_host(a).data_ptr() == a.data_ptr() and on_cpu.copy(a).data_ptr() != a.data_ptr() and len(pinned) == 3
    )


def test_a_cuda_evaluation_gives_large_cached_gpu_memory_back_and_keeps_small():
    """What the supervisor's allocator keeps unused goes back to the driver when it is more than
    the threshold (the solution process allocates only from what is free); less stays cached
    (allocating it again would cost the next phase); nothing happens on the CPU."""
    from kernelbench_v3.evaluate.supervisor.reference.placement import release_cached

    emptied = []

    def release(device, unused):
        return release_cached(device, above=1 << 30, unused=lambda: unused, empty_cache=lambda: emptied.append(device))

    assert release("cuda", 57 << 30) and emptied == ["cuda"]
    assert not release("cuda", 1 << 30) and not release("cuda", 0) and emptied == ["cuda"]
    assert not release("cpu", 57 << 30) and emptied == ["cuda"]


def test_a_model_built_on_the_host_first_gets_the_same_values_as_one_built_in_the_turn():
    """`build_on_host` (made before the GPU is taken) is the published construction; `_build`
    re-randomizes it where it lands, exactly as a build made inside the turn: the reference
    cache's state digest and the solution's weights depend on it."""
    from kernelbench_v3.catalog.materialize import load_module, make_model
    from kernelbench_v3.catalog.problem import get_problem
    from kernelbench_v3.evaluate.cases import PARAM_SEED
    from kernelbench_v3.evaluate.supervisor.reference.cache import state_digest
    from kernelbench_v3.evaluate.supervisor.reference.reference_run import _build, build_on_host

    problem = get_problem("level2/86_Matmul_Divide_GELU")
    source, sizes = problem.path.read_text(), dict(problem.reduced)
    built = build_on_host(source, problem.name, sizes)
    published = make_model(load_module(source, sizes, stem=problem.name), "cpu", PARAM_SEED)
    assert built[0].Model.__name__ == "Model" and not built[1].training
    assert state_digest(built[1]) == state_digest(published)
    _, from_host = _build(source, problem.name, sizes, "cpu", PARAM_SEED, built=built)
    _, in_turn = _build(source, problem.name, sizes, "cpu", PARAM_SEED)
    assert state_digest(from_host) == state_digest(in_turn) != state_digest(published)


def test_a_timings_float64_model_is_widened_once_within_its_budget_with_the_same_residuals(monkeypatch):
    """Judging a timed call under the float64 rule widened a deep copy of the whole reference per
    call; `Widened` makes that copy once per timing, only while it fits its byte budget."""
    from kernelbench_v3.evaluate.supervisor.reference import reference_run

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()).eval()
    x = torch.randn(4, 8)
    out = model(x).detach()
    copies = []
    real_deepcopy = reference_run.copy.deepcopy
    monkeypatch.setattr(reference_run.copy, "deepcopy", lambda m: copies.append(1) or real_deepcopy(m))
    fresh = reference_run.float64_reference(model, [x], out, tf32=False)
    widened = reference_run.Widened(model)
    kept = [reference_run.float64_reference(model, [x], out, tf32=False, m64=widened.get()) for _ in range(3)]
    assert len(copies) == 2  # one for the fresh run, one for all three judged ones
    for info in kept:
        assert torch.equal(info["residual"], fresh["residual"]) and info["residual"].dtype == torch.float64
    assert reference_run.Widened(model, max_bytes=8 * 72 - 1).get() is None  # 72 values in float64 do not fit
    assert reference_run.Widened(model, max_bytes=8 * 72).get() is not None
