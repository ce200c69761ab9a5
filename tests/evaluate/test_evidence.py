"""Evidence collectors: Triton programs counted where they run, the bytes they and PyTorch ops
move, and where a forward's output came from (CPU)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

from tests.paths import SOLUTIONS


@contextlib.contextmanager
def _counter_installed(log):
    """install_program_counter, undone afterwards (it patches the interpreter process-wide)."""
    from triton.runtime import interpreter

    from kernelbench_v3.evaluate import evidence

    builder = interpreter.InterpreterBuilder
    names = ("create_dot", "create_masked_load", "create_masked_store", "create_atomic_rmw", "create_atomic_cas")
    saved = (interpreter.GridExecutor.__call__, interpreter.InterpretedFunction.run, *(vars(builder)[n] for n in names))
    try:
        assert evidence.install_program_counter(log)
        yield
    finally:
        interpreter.GridExecutor.__call__, interpreter.InterpretedFunction.run = saved[:2]
        for name, value in zip(names, saved[2:]):
            setattr(builder, name, value)


def test_interpreter_programs_count_where_they_run_not_at_the_launch():
    pytest.importorskip("triton")
    from triton.runtime.interpreter import InterpretedFunction

    from kernelbench_v3.catalog.materialize import import_file
    from kernelbench_v3.evaluate import evidence

    add_one = import_file(SOLUTIONS / "triton_add_one.py").add_one
    log = evidence.ProgramLog()
    with _counter_installed(log):
        assert evidence.install_program_counter(log)
        kernel = InterpretedFunction(add_one)
        x, y = torch.arange(10.0), torch.empty(10)
        kernel[(1,)](x, y, 10, BLOCK=16)  # not recording yet
        log.recording = True
        kernel[(2,)](x, y, 10, BLOCK=16)
        kernel[(0,)](x, y, 10, BLOCK=16)  # an empty grid runs no program
        with pytest.raises(Exception):  # noqa: B017 (any launch error will do)
            kernel[(1,)](x, y, BLOCK=16)  # a launch that raises is not a launch that ran
        assert torch.equal(y, x + 1)
        assert log.launches == [("add_one", 2), ("add_one", 0)] and log.failed == ["add_one"]


BIG = 1024  # floats: 4 KiB, above evidence.SMALL_BYTES


def test_the_op_recorder_counts_each_ops_tensor_bytes():
    from kernelbench_v3.evaluate.evidence import OpRecorder

    x = torch.randn(BIG)
    with OpRecorder() as recorder:
        (x * 2).sum()
    ops = recorder.summary()
    assert ops["mul"][2] == 2 * x.nbytes  # read x, wrote x * 2 (the scalar is no tensor)
    assert ops["sum"][2] == x.nbytes + 4


def test_provenance_follows_pytorch_and_marks_what_came_from_elsewhere():
    from kernelbench_v3.evaluate.evidence import OpRecorder, Provenance, Sources

    x = torch.randn(BIG)
    prov = Provenance()
    prov.seed(Sources([x]))
    foreign = prov.foreign_values

    with OpRecorder(prov):
        y = (x - x.max()).exp()  # PyTorch from the input: known
        z = torch.from_numpy(np.exp(x.numpy()))  # numpy's memory: never dispatched
        w = z + 1.0  # made from foreign memory
        out = torch.empty_like(x)
        out.copy_(z)  # foreign values written into a known buffer
        tiny = torch.from_numpy(np.ones(4, dtype=np.float32))  # a small constant: never foreign
    assert not foreign(y) and not foreign(x) and not foreign(tiny)
    assert foreign(z) and foreign(w) and foreign(out)


def test_a_workspace_kept_outside_the_sources_is_known_once_overwritten():
    from kernelbench_v3.evaluate.evidence import OpRecorder, Provenance, Sources

    x = torch.randn(BIG)
    zeroed, copied, stale = torch.empty(BIG), torch.empty(BIG), torch.empty(BIG)  # a cache's buffers
    prov = Provenance()
    prov.seed(Sources([x]))
    with OpRecorder(prov):
        zeroed.zero_()  # a fill: what the memory held before does not matter
        copied.copy_(x)  # a copy: only its source does
        stale.add_(x)  # reads what it held, which no source accounts for
    assert not prov.foreign_values(zeroed)
    assert not prov.foreign_values(copied)
    assert prov.foreign_values(stale)


def test_a_program_that_loads_foreign_memory_stores_foreign_memory():
    pytest.importorskip("triton")
    from triton.runtime.interpreter import InterpretedFunction

    from kernelbench_v3.catalog.materialize import import_file
    from kernelbench_v3.evaluate import evidence

    kernel = InterpretedFunction(import_file(SOLUTIONS / "triton_add_one.py").add_one)
    log = evidence.ProgramLog()
    x = torch.randn(BIG)
    numpy_made = torch.from_numpy(np.exp(x.numpy()))

    def forward(source):
        out = torch.empty_like(x)
        kernel[(BIG // 256,)](source, out, BIG, BLOCK=256)
        return out

    with _counter_installed(log):
        honest, from_x = evidence.collect(lambda: forward(x), "cpu", log, sources=evidence.Sources([x]))
        copied, from_numpy = evidence.collect(lambda: forward(numpy_made), "cpu", log, sources=evidence.Sources([x]))
    assert torch.equal(honest, x + 1) and torch.allclose(copied, numpy_made + 1)
    assert from_x["output_foreign"] is False and from_numpy["output_foreign"] is True
    assert from_x["program_bytes"] == 2 * x.nbytes  # every lane loaded once and stored once
    unseeded = evidence.collect(lambda: forward(x), "cpu", log)[1]
    assert unseeded["output_foreign"] is None  # no sources given: provenance is not traced
