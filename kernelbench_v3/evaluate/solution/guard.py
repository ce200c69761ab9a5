"""Guarding the candidate process's global state against the solution it imports.

Owns three things: the snapshot/restore of numerics-relevant global flags (`torch.backends`,
matmul precision, default dtype, grad mode) and RNG states; and tamper detection - the identity
of every function and attribute of the namespaces a solution could monkeypatch to fool the
evaluator (torch, torch.Tensor, torch.nn.functional, torch.cuda, the timer, pickling, and the
evaluator's own modules), compared before and after the solution runs.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch


def _flag_readers() -> dict[str, Callable[[], Any]]:
    b = torch.backends
    readers: dict[str, Callable[[], Any]] = {
        "cuda.matmul.allow_tf32": lambda: b.cuda.matmul.allow_tf32,
        "cuda.matmul.allow_fp16_reduced_precision_reduction": lambda: (
            b.cuda.matmul.allow_fp16_reduced_precision_reduction
        ),
        "cuda.matmul.allow_bf16_reduced_precision_reduction": lambda: (
            b.cuda.matmul.allow_bf16_reduced_precision_reduction
        ),
        "cudnn.allow_tf32": lambda: b.cudnn.allow_tf32,
        "cudnn.benchmark": lambda: b.cudnn.benchmark,
        "cudnn.deterministic": lambda: b.cudnn.deterministic,
        "cudnn.enabled": lambda: b.cudnn.enabled,
        "float32_matmul_precision": torch.get_float32_matmul_precision,
        "default_dtype": torch.get_default_dtype,
        "grad_enabled": torch.is_grad_enabled,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled,
        "flash_sdp": lambda: b.cuda.flash_sdp_enabled(),
        "mem_efficient_sdp": lambda: b.cuda.mem_efficient_sdp_enabled(),
        "math_sdp": lambda: b.cuda.math_sdp_enabled(),
    }
    return readers


def _flag_writers() -> dict[str, Callable[[Any], Any]]:
    b = torch.backends
    return {
        "cuda.matmul.allow_tf32": lambda v: setattr(b.cuda.matmul, "allow_tf32", v),
        "cuda.matmul.allow_fp16_reduced_precision_reduction": lambda v: setattr(
            b.cuda.matmul, "allow_fp16_reduced_precision_reduction", v
        ),
        "cuda.matmul.allow_bf16_reduced_precision_reduction": lambda v: setattr(
            b.cuda.matmul, "allow_bf16_reduced_precision_reduction", v
        ),
        "cudnn.allow_tf32": lambda v: setattr(b.cudnn, "allow_tf32", v),
        "cudnn.benchmark": lambda v: setattr(b.cudnn, "benchmark", v),
        "cudnn.deterministic": lambda v: setattr(b.cudnn, "deterministic", v),
        "cudnn.enabled": lambda v: setattr(b.cudnn, "enabled", v),
        "float32_matmul_precision": torch.set_float32_matmul_precision,
        "default_dtype": torch.set_default_dtype,
        "grad_enabled": torch.set_grad_enabled,
        "deterministic_algorithms": torch.use_deterministic_algorithms,
        "flash_sdp": b.cuda.enable_flash_sdp,
        "mem_efficient_sdp": b.cuda.enable_mem_efficient_sdp,
        "math_sdp": b.cuda.enable_math_sdp,
    }


def read_flags() -> dict[str, Any]:
    flags: dict[str, Any] = {}
    for name, read in _flag_readers().items():
        try:
            flags[name] = read()
        except Exception:  # a flag this torch build does not have
            continue
    return flags


def restore_flags(saved: dict[str, Any]) -> list[str]:
    """Set every flag back to `saved`; returns the names that had changed."""
    changed = []
    current = read_flags()
    writers = _flag_writers()
    for name, value in saved.items():
        if current.get(name) != value:
            changed.append(name)
            try:
                writers[name](value)
            except Exception:
                pass
    return changed


def save_rng() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        state["numpy"] = numpy.random.get_state()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])
    if "numpy" in state and "numpy" in sys.modules:
        sys.modules["numpy"].random.set_state(state["numpy"])


# The evidence collectors, whose classes are guarded as well as their modules' names.
COLLECTOR_MODULES = frozenset(
    f"kernelbench_v3.evaluate.{m}" for m in ("evidence", "provenance", "program_counter", "kernel_reach")
)


def guarded_namespaces() -> dict[str, Any]:
    """The namespaces whose contents must not change identity while a solution runs."""
    import pickle
    import time

    import torch.nn.functional as F

    spaces: dict[str, Any] = {
        "torch": torch,
        "torch.Tensor": torch.Tensor,
        "torch.nn.functional": F,
        "torch.nn.Module": torch.nn.Module,
        "torch.testing": torch.testing,
        "torch.serialization": torch.serialization,
        "time": time,
        "pickle": pickle,
        "torch.cuda": torch.cuda,
        "torch.cuda.Event": torch.cuda.Event,
        "torch.autograd.grad_mode": torch.autograd.grad_mode,
    }
    try:
        from triton.runtime.jit import JITFunction

        spaces["triton.JITFunction"] = JITFunction
    except Exception:
        pass
    interpreter = sys.modules.get("triton.runtime.interpreter")  # imported by the program counter
    if interpreter is not None:
        # The launch path the program counter wraps: unwrapping it would run launches unread.
        for name in ("GridExecutor", "InterpretedFunction", "InterpreterBuilder"):
            if isinstance(getattr(interpreter, name, None), type):
                spaces[f"triton.{name}"] = getattr(interpreter, name)
    for name, module in list(sys.modules.items()):
        if name.startswith("kernelbench_v3.") and isinstance(module, ModuleType):
            spaces[name] = module
            if name in COLLECTOR_MODULES:
                # The collectors' classes too: a patched `Provenance.end_launch` or a kernel
                # reader that finds nothing would change the evidence, not a module's names.
                for attr, value in list(vars(module).items()):
                    if isinstance(value, type) and value.__module__ == name:
                        spaces[f"{name}.{attr}"] = value
    return spaces


def snapshot_namespaces() -> dict[str, dict[str, int]]:
    return {label: {k: id(v) for k, v in list(vars(ns).items())} for label, ns in guarded_namespaces().items()}


def tampered(before: dict[str, dict[str, int]]) -> list[str]:
    """`namespace.attribute` for every attribute replaced or removed since `before` (and, on
    classes, added: a new `torch.Tensor.__eq__` shadows the C implementation)."""
    changes: list[str] = []
    spaces = guarded_namespaces()
    for label, ids in before.items():
        ns = spaces.get(label)
        if ns is None:
            changes.append(f"{label} (removed from sys.modules)")
            continue
        values = dict(vars(ns))
        for key, ident in ids.items():
            if key in ("__dict__", "__weakref__"):
                continue
            if key not in values:
                changes.append(f"{label}.{key} (deleted)")
            elif id(values[key]) != ident and not _benign(label, key, values[key]):
                changes.append(f"{label}.{key}")
        if isinstance(ns, type):
            changes.extend(
                f"{label}.{k} (added)" for k, v in values.items() if k not in ids and not _benign(label, k, v)
            )
    return changes


# Dunder attributes the Python runtime itself writes into a class lazily, as data caches:
# copyreg caches `__slotnames__` the first time an instance is pickled or deep-copied, class
# `__annotations__` appear on first access, ABCs and typing Protocols cache their member sets.
RUNTIME_CACHE_DUNDERS: frozenset[str] = frozenset(
    {
        "__slotnames__",
        "__annotations__",
        "__annotate__",
        "__abstractmethods__",
        "__warningregistry__",
        "__protocol_attrs__",
        "__non_callable_proto_members__",
        "__callable_proto_members_only__",
    }
)


def _is_data(value: Any) -> bool:
    """A plain data value: neither callable nor a descriptor, so it cannot replace behaviour."""
    return not callable(value) and not hasattr(type(value), "__get__")


def _benign(label: str, key: str, value: Any = None) -> bool:
    """Attributes that legitimately change identity (caches, counters, lazily bound state).
    A dunder is benign only when the runtime writes it as a data cache and it still holds data:
    an added or replaced `__eq__`, `__torch_function__`, ... is always reported."""
    if key.startswith("__") and key.endswith("__"):
        return key in RUNTIME_CACHE_DUNDERS and _is_data(value)
    lowered = key.lower()
    return (
        "cache" in lowered
        or "_initialized" in lowered
        or "lock" in lowered
        or lowered in ("_tls", "_queued_calls", "_lazy_seed_tracker", "_default_dtype")
        or (label.startswith("kernelbench_v3.") and key.isupper())
    )


def settle_lazy_torch_patches() -> None:
    """Let torch make the global patches it makes lazily, before the namespaces are snapshot,
    so they are not blamed on the solution: importing torch._dynamo rebinds torch.manual_seed,
    and the first torch.compile call wraps nn.Module.__init__/__setstate__ (generation tagging)."""
    import importlib

    for name in ("torch._dynamo", "torch.profiler"):
        importlib.import_module(name)
    try:
        from torch._dynamo.mutation_guard import install_generation_tagging_init
    except ImportError:  # a torch without it patches nothing there
        return
    install_generation_tagging_init()
