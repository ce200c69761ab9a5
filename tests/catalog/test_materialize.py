"""Materializing: real files, size overrides that derived sizes follow, seeds that reproduce."""

import inspect
import os
import textwrap
from pathlib import Path

import pytest
import torch

from kernelbench_v3.catalog.materialize import (
    MaterializeError,
    instantiate,
    load_module,
    parse_sizes,
    rewrite_sizes,
)
from kernelbench_v3.catalog.problem import get_problem

SOURCE = textwrap.dedent("""
    import torch
    OP_TYPE = "gemm"
    SUPPORTED_PRECISIONS = ["fp32"]
    HARDWARE_REQUIRED = ["H100"]
    batch_size = 4
    seq_len = 8
    height, width = 3, 5
    M = batch_size * seq_len
    class Model(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.proj = torch.nn.Linear(width, height)
            self.m = m
        def forward(self, x):
            return self.proj(x).reshape(self.m, -1)
    def get_inputs():
        return [torch.randn(M, width)]
    def get_init_inputs():
        return [M]
""")


def test_source_text_becomes_a_module_in_a_real_file():
    module = load_module(SOURCE)
    assert Path(module.__file__).is_file()
    assert "def forward" in inspect.getsource(module.Model)


def test_size_overrides_rewrite_literals_and_derived_sizes_follow():
    module = load_module(SOURCE, {"batch_size": 2, "width": 7})
    assert (module.batch_size, module.seq_len, module.M, module.width, module.height) == (2, 8, 16, 7, 3)
    out = instantiate(SOURCE, sizes={"batch_size": 2, "width": 7}).run()
    assert out.shape == (16, 3)


def test_unknown_size_override_is_a_clear_error():
    with pytest.raises(MaterializeError, match=r"cannot override \['M'\]: not size variables"):
        rewrite_sizes(SOURCE, {"M": 3}, origin="x.py")
    with pytest.raises(MaterializeError, match="x.py"):
        rewrite_sizes(SOURCE, {"nope": 3}, origin="x.py")


def test_same_seed_reproduces_bit_for_bit_and_another_seed_differs():
    a = instantiate(SOURCE, seed=7).run()
    b = instantiate(SOURCE, seed=7).run()
    c = instantiate(SOURCE, seed=8).run()
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_problem_from_path_and_from_source_agree(problems_dir):
    problem = get_problem("level1/23_Softmax", problems_dir)
    from_path = instantiate(problem, seed=3, sizes=problem.reduced).run()
    from_text = instantiate(problem.source, seed=3, sizes=problem.reduced).run()
    assert torch.equal(from_path, from_text)


def test_parse_sizes():
    assert parse_sizes("batch_size=4, dim=64,scale=0.5,flag=False") == {
        "batch_size": 4,
        "dim": 64,
        "scale": 0.5,
        "flag": False,
    }
    assert parse_sizes("") == {}
    with pytest.raises(ValueError, match="is not NAME=VALUE"):
        parse_sizes("batch_size")
    with pytest.raises(ValueError, match="is not a number"):
        parse_sizes("dim=abc")


TRITON_SOURCE = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=mask), mask=mask)

    def double(x):
        out = torch.empty_like(x)
        _double[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
        return out
""")


def test_triton_kernel_from_source_text_runs_under_the_interpreter():
    module = load_module(TRITON_SOURCE, stem="triton_double")
    x = torch.arange(100, dtype=torch.float32)
    assert torch.equal(module.double(x), 2 * x)


def test_threads_that_write_the_same_module_at_once_do_not_collide():
    # Two evaluations of one problem in one process (the attack suite, a batch) materialize the
    # same file at the same moment: each must get its own temporary name.
    import threading

    from kernelbench_v3.catalog.materialize import write_module_file

    source = f"# {os.getpid()} {threading.get_ident()}\nX = 1\n"
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def write_many() -> None:
        barrier.wait()
        for i in range(40):
            try:
                # a torn or foreign file forces a rewrite on every call, as a solution's edit would
                path = write_module_file(source, "race")
                path.write_text("X = 2\n") if i % 2 else None
            except BaseException as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(exc)

    threads = [threading.Thread(target=write_many) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[:3]
    assert write_module_file(source, "race").read_text() == source
