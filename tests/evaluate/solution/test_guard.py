"""Snapshot/restore of global flags and tamper detection in the solution process."""

from __future__ import annotations

import copy

import torch

from kernelbench_v3.evaluate.solution import guard


def test_guard_restores_flags_and_detects_replaced_functions():
    flags = guard.read_flags()
    torch.backends.cudnn.allow_tf32 = not flags["cudnn.allow_tf32"]
    torch.set_float32_matmul_precision("medium" if flags["float32_matmul_precision"] != "medium" else "high")
    changed = guard.restore_flags(flags)
    assert {"cudnn.allow_tf32", "float32_matmul_precision"} <= set(changed)
    assert guard.read_flags() == flags
    before = guard.snapshot_namespaces()
    original = torch.allclose
    try:
        torch.allclose = lambda *a, **k: True
        torch.Tensor.__eq__ = lambda self, other: True
        found = guard.tampered(before)
    finally:
        torch.allclose = original
        del torch.Tensor.__eq__
    assert "torch.allclose" in found and "torch.Tensor.__eq__ (added)" in found
    assert guard.tampered(before) == []


def test_guard_ignores_runtime_data_caches_but_not_replaced_behaviour():
    before = guard.snapshot_namespaces()
    saved = {k: vars(torch.Tensor)[k] for k in ("__slotnames__", "__torch_function__") if k in vars(torch.Tensor)}
    try:
        if "__slotnames__" in saved:
            del torch.Tensor.__slotnames__
        copy.deepcopy(torch.ones(2))  # copyreg caches torch.Tensor.__slotnames__ (a list) again
        assert guard.tampered(before) == []
        torch.Tensor.__slotnames__ = lambda *a: []  # a callable is no cache
        assert "torch.Tensor.__slotnames__" in guard.tampered(before)[0]
        torch.Tensor.__torch_function__ = classmethod(lambda *a, **k: None)
        assert "torch.Tensor.__torch_function__" in guard.tampered(before)
    finally:
        for key in ("__slotnames__", "__torch_function__"):
            if key in saved:
                setattr(torch.Tensor, key, saved[key])
            elif key in vars(torch.Tensor):
                delattr(torch.Tensor, key)
    assert guard.tampered(before) == []


def test_guard_takes_torch_compile_generation_tagging_for_torch_not_the_solution():
    guard.settle_lazy_torch_patches()
    before = guard.snapshot_namespaces()
    torch.compile(lambda t: t * 2, backend="eager")(torch.ones(3))
    assert guard.tampered(before) == []


def test_a_patched_evidence_collector_class_is_reported():
    from kernelbench_v3.evaluate.provenance import Provenance

    before = guard.snapshot_namespaces()
    original = Provenance.end_launch
    try:
        Provenance.end_launch = lambda self: False  # a launch that never finds memory written behind it
        found = guard.tampered(before)
    finally:
        Provenance.end_launch = original
    assert "kernelbench_v3.evaluate.provenance.Provenance.end_launch" in found
    assert guard.tampered(before) == []


def test_unwrapping_the_interpreters_launch_path_is_reported():
    interpreter = __import__("pytest").importorskip("triton.runtime.interpreter")
    before = guard.snapshot_namespaces()
    wrapped = interpreter.GridExecutor.__call__
    try:
        interpreter.GridExecutor.__call__ = lambda self, *a, **k: None  # launches that nobody reads
        found = guard.tampered(before)
    finally:
        interpreter.GridExecutor.__call__ = wrapped
    assert "triton.GridExecutor.__call__" in found
