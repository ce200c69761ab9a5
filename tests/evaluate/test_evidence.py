"""Evidence collectors: Triton programs counted where they run."""

from __future__ import annotations

import pytest
import torch

from tests.paths import SOLUTIONS


def test_interpreter_programs_count_where_they_run_not_at_the_launch():
    pytest.importorskip("triton")
    from triton.runtime import interpreter
    from triton.runtime.interpreter import InterpretedFunction

    from kernelbench_v3.catalog.materialize import import_file
    from kernelbench_v3.evaluate import evidence

    add_one = import_file(SOLUTIONS / "triton_add_one.py").add_one
    original = interpreter.GridExecutor.__call__
    log = evidence.ProgramLog()
    try:
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
    finally:
        interpreter.GridExecutor.__call__ = original
