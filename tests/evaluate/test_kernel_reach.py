"""An interpreted kernel body may reach triton.language and other jit functions only (issue 39,
item 2): every launch is read before it runs, and one that reaches further is refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from kernelbench_v3.evaluate.kernel_reach import KernelReachError, Snapshot, _Checker, check_launch  # noqa: E402
from tests.paths import EXAMPLES, SOLUTIONS  # noqa: E402

NP = np  # a global the bodies below may reach for


@pytest.fixture(scope="module")
def snap():
    return Snapshot()


def _interpreted(fn):
    from triton.runtime.interpreter import InterpretedFunction

    return InterpretedFunction(fn)


def _findings(snap, fn, *args, **kwargs):
    jit = _interpreted(fn)
    return check_launch(snap, jit.rewrite(), fn.__name__, args, kwargs)


def honest(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = tl.where(x > 0, x, tl.exp(x) - 1) if 0 <= n < 10 else tl.math.exp(x)
    tl.store(y_ptr + offs, tl.maximum(y, tl.zeros([BLOCK], tl.float32)), mask=mask)


def reaches_numpy(x_ptr):
    NP.exp(1.0)
    tl.store(x_ptr, tl.load(x_ptr))


def imports_inside(x_ptr):
    import ctypes  # noqa: F401

    tl.store(x_ptr, tl.load(x_ptr))


def reads_handle(x_ptr):
    x = tl.load(x_ptr)
    x.handle.data[0] = 1.0
    tl.store(x_ptr, x)


def calls_a_constexpr(x_ptr, FN: tl.constexpr):
    FN()
    tl.store(x_ptr, tl.load(x_ptr))


def opens_a_file(x_ptr):
    open("/tmp/x")
    tl.store(x_ptr, tl.load(x_ptr))


def test_an_honest_body_may_run(snap):
    x = torch.randn(8)
    assert _findings(snap, honest, x, torch.empty(8), 8, BLOCK=8) == []


@pytest.mark.parametrize(
    "fn, args, why",
    [
        (reaches_numpy, (), "global NP is module"),
        (imports_inside, (), "IMPORT_NAME ctypes"),
        (reads_handle, (), "reads attribute 'handle'"),
        (calls_a_constexpr, (lambda: np.exp(1.0),), "argument 1 is function"),
        (calls_a_constexpr, (np.zeros(3),), "argument 1 is ndarray"),
        (opens_a_file, (), "global open is builtin_function_or_method"),
    ],
    ids=["numpy_global", "import", "handle", "constexpr_callable", "constexpr_array", "open"],
)
def test_a_body_that_reaches_further_is_refused(snap, fn, args, why):
    found = _findings(snap, fn, torch.zeros(4), *args)
    assert any(why in f for f in found), found


def test_a_tensor_subclass_argument_is_refused(snap):
    class Sneaky(torch.Tensor):
        pass

    x = torch.zeros(8).as_subclass(Sneaky)
    found = _findings(snap, honest, x, torch.empty(8), 8, BLOCK=8)
    assert any("not a plain tensor" in f for f in found), found


def test_a_patched_triton_language_refuses_every_launch(snap, monkeypatch):
    monkeypatch.setattr(tl, "exp", lambda *a, **k: None)
    found = _findings(snap, honest, torch.zeros(8), torch.empty(8), 8, BLOCK=8)
    assert any("triton.language or the interpreter was changed" in f for f in found), found


def test_every_honest_kernel_of_the_repository_may_run(snap):
    from triton.runtime.interpreter import InterpretedFunction

    from kernelbench_v3.catalog.materialize import import_file

    folders = [EXAMPLES, SOLUTIONS / "honest", SOLUTIONS]
    files = [p for folder in folders for p in sorted(folder.glob("*.py" if folder == SOLUTIONS else "**/*.py"))]
    checked = 0
    for i, path in enumerate(files):
        module = import_file(path, f"kbv3_reach_{i}")
        for value in list(vars(module).values()):
            if type(value) is InterpretedFunction:
                checker = _Checker(snap)
                checker.function(value)
                assert checker.found == [], (path.name, checker.found)
                checked += 1
    assert checked >= 8


def test_a_refused_launch_raises_and_is_reported():
    from kernelbench_v3.evaluate.evidence import ProgramLog, collect, install_program_counter
    from tests.evaluate.test_evidence import _counter_installed

    log = ProgramLog()
    kernel = _interpreted(reaches_numpy)
    with _counter_installed(log):
        assert install_program_counter(log)
        with pytest.raises(KernelReachError, match="reaches beyond triton.language"):
            collect(lambda: kernel[(1,)](torch.zeros(4)), "cpu", log)
        _, ev = collect(lambda: None, "cpu", log)
    assert ev["refused_launches"] and "global NP" in ev["refused_launches"][0]


REBOUND = tl.exp


def uses_a_global(x_ptr):
    tl.store(x_ptr, REBOUND(tl.load(x_ptr)))


def test_a_frozen_body_keeps_what_was_read_and_only_the_allowed_builtins(snap):
    from kernelbench_v3.evaluate.kernel_reach import freeze

    global REBOUND
    frozen = freeze(snap, _interpreted(uses_a_global).rewrite())
    try:
        REBOUND = print  # rebound after the read, as a grid function or a hook could
        assert frozen.__globals__["REBOUND"] is tl.exp
    finally:
        REBOUND = tl.exp
    builtins_seen = frozen.__globals__["__builtins__"]
    assert "range" in builtins_seen and "open" not in builtins_seen and "__import__" not in builtins_seen


def test_the_snapshot_takes_the_interpreter_globals_this_triton_has(monkeypatch):
    # Triton 3.6 (the H200 image's) has no `_InterpreterComparison`; a snapshot that required it
    # stopped every solution process on a GPU before its import, with a silent exit.
    from triton.runtime import interpreter

    monkeypatch.delattr(interpreter, "_InterpreterComparison", raising=False)
    snapshot = Snapshot()
    assert "_InterpreterComparison" not in snapshot.globals_
    assert snapshot.globals_["interpreter_semantic"] is interpreter.interpreter_semantic
