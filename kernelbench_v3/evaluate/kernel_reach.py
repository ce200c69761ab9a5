"""What an interpreted Triton kernel body may reach: `triton.language` and other jit functions.

Under TRITON_INTERPRET=1 a `@triton.jit` body is plain Python, run once per program: nothing
but this check stops it from calling numpy, torch or ctypes and writing the output itself, with
the launch credited for it. A kernel compiled for a GPU can reach nothing else, so an honest
kernel loses nothing here. Before every launch (`check_launch`) the body that will run, every
nested code object in it and every jit function it calls are read instruction by instruction:

- no import, no global or name store, no class built inside it;
- every global and free variable it reads resolves to a value that is safe: a constant (exact
  bool, int, float, str, None, and tuples of them), an object of `triton.language` (its modules,
  functions, classes and dtypes, by identity with what was there before the solution was
  imported), a few pure builtins (`range`, `min`, `max`, ...), the two names the interpreter's
  own rewrite inserts, or another jit function, itself checked;
- every attribute it reads is one of `triton.language`'s public names (`ALLOWED_ATTRIBUTES`),
  never a private one and never one that leads out (`handle`, `data`, `type`, modules such as
  `core` or `semantic`);
- every argument is a plain tensor (not a subclass, whose methods would run in the launcher) or
  a safe value, so a constexpr cannot smuggle a callable in.

The check runs when the launch starts and again where the grid is evaluated (after the pre-run
hooks and the grid function, solution code the launch runs), on the arguments the programs will
receive; then the body runs on a frozen copy of what was read (`freeze`): its module's globals,
builtins cut down to the allowed ones, its closure cells, its own jit functions frozen alike.

`triton.language` itself and the interpreter are compared with their snapshot (`snapshot`,
taken when the program counter is installed, before any solution code ran): a patched `tl.load`
or `tl.tensor.__add__` refuses the launch too. A refused launch raises `KernelReachError`, and
the reason is reported as evidence (`main_work`). Memory the body could still reach another way
is put back at the launch's end (`provenance.Provenance.end_launch`).
"""

from __future__ import annotations

import builtins
import dis
import functools
import inspect
import types
from typing import Any

import torch

# Builtins a kernel body may call: pure, and unable to reach an object's internals.
ALLOWED_BUILTINS = frozenset(
    "range min max len int float bool isinstance abs tuple list zip enumerate reversed print "
    "ValueError TypeError AssertionError RuntimeError NotImplementedError IndexError".split()
)
# Attribute names that lead out of triton.language, wherever they are found.
DENIED_ATTRIBUTES = frozenset(
    "handle data type ctypes builder semantic core standard random target_info utils pkgutil module modules "
    "spec module_finder module_from_spec to_ir fn rewrite rewriter kwargs".split()
)
# Attributes of tensors, dtypes and the interpreter's rewrite that live on instances.
INSTANCE_ATTRIBUTES = frozenset("dtype shape numel value element_ty T to_tensor get_result language".split())
_DENIED_OPS = frozenset(
    {
        "IMPORT_NAME",
        "IMPORT_FROM",
        "IMPORT_STAR",
        "STORE_GLOBAL",
        "DELETE_GLOBAL",
        "STORE_NAME",
        "DELETE_NAME",
        "LOAD_BUILD_CLASS",
        "STORE_ATTR",
        "DELETE_ATTR",
        "LOAD_SUPER_ATTR",
    }
)
_ATTR_OPS = frozenset({"LOAD_ATTR", "LOAD_METHOD"})
_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"})
_CONSTANT_TYPES = (bool, int, float, str, bytes, complex, type(None), type(Ellipsis))


class KernelReachError(RuntimeError):
    """A kernel body reaches beyond triton.language: the launch is refused."""


class Snapshot:
    """The objects of triton.language and of the interpreter before any solution code ran."""

    def __init__(self) -> None:
        import triton
        import triton.language as tl
        from triton.runtime import interpreter

        self.tl, self.interpreter = tl, interpreter
        self.function_type = interpreter.InterpretedFunction
        modules = [tl, tl.math, tl.core, tl.standard]
        extra = getattr(tl, "extra", None)
        cuda = getattr(extra, "cuda", None)
        libdevice = getattr(cuda, "libdevice", None)
        modules += [m for m in (cuda, libdevice, _module("triton.language.extra.libdevice")) if inspect.ismodule(m)]
        self.namespaces = [(m, {k: v for k, v in vars(m).items() if not k.startswith("__")}) for m in modules]
        classes = [tl.tensor, tl.dtype, tl.constexpr, tl.pointer_type, tl.block_type]
        watched = [*classes, interpreter.InterpreterBuilder, interpreter.GridExecutor, self.function_type]
        self.classes = {c: _static(c) for c in watched}
        # The interpreter's module-level objects its patches reach (Triton 3.6 has no comparison
        # class; 3.9 does): each one present is watched, none is required.
        self.globals_ = {
            k: getattr(interpreter, k)
            for k in ("interpreter_semantic", "_InterpreterComparison")
            if hasattr(interpreter, k)
        }
        self.interpreter_codes = {
            id(code)
            for value in vars(interpreter).values()
            if isinstance(value, types.FunctionType) and value.__module__ == interpreter.__name__
            for code in _codes(value.__code__)
        }
        self.patch_code = next(
            (c for c in interpreter._patch_attr.__code__.co_consts if isinstance(c, types.CodeType)), None
        )
        safe: dict[int, Any] = {}
        for m in modules:
            safe[id(m)] = m
            for name, value in vars(m).items():
                if not name.startswith("_") and _triton_object(value):
                    safe[id(value)] = value
        for value in (triton, extra, *self.globals_.values()):
            if value is not None:
                safe[id(value)] = value
        for name in ALLOWED_BUILTINS:
            safe[id(getattr(builtins, name))] = getattr(builtins, name)
        self.safe = safe
        self.attributes = allowed_attributes(modules, classes)

    def _same(self, now: Any, before: Any) -> bool:
        """`now` is `before`, or the interpreter's own patch of it: a device function's call
        patches triton.language.core and never restores it (`InterpretedFunction.__call__`)."""
        if now is before:
            return True
        while now is not before and getattr(now, "__code__", None) is self.patch_code:
            now = (now.__kwdefaults__ or {}).get("member")
        if type(now) is functools.partial:
            now = now.func
        if type(now) is property:  # `tl.tensor.T` while a launch runs
            now = now.fget
        if now is before or now is builtins.print:  # the interpreter's static_print
            return True
        return id(getattr(now, "__code__", None)) in self.interpreter_codes

    def tampered(self) -> list[str]:
        """Names of triton.language or the interpreter that changed since the snapshot, other than by
        the interpreter's own patches (names it adds to a module are not read: attributes are
        checked by name, and no allowed name is new)."""
        found = []
        for module, before in self.namespaces:
            now = vars(module)
            found += [f"{module.__name__}.{k}" for k, v in before.items() if not self._same(now.get(k, _MISSING), v)]
        for cls, before in self.classes.items():
            now = _static(cls)
            found += [
                f"{cls.__qualname__}.{k}"
                for k in before.keys() | now.keys()
                if not self._same(now.get(k), before.get(k))
            ]
        found += [f"interpreter.{k}" for k, v in self.globals_.items() if getattr(self.interpreter, k, None) is not v]
        return found


_MISSING = object()


def _module(name: str) -> Any:
    """The module `name` (`from triton.language.extra import libdevice`), or None without it."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _static(cls: type) -> dict[str, Any]:
    """Every attribute of a class as its MRO holds it (descriptors themselves, so identities are
    stable): the interpreter's patch of `tl.tensor` and its restore leave these unchanged."""
    return {name: inspect.getattr_static(cls, name, None) for name in dir(cls) if name not in _CLASS_BOOKKEEPING}


_CLASS_BOOKKEEPING = frozenset({"__annotations__", "__dict__", "__weakref__", "__doc__", "__module__"})


def _triton_object(value: Any) -> bool:
    module = getattr(type(value), "__module__", "") or ""
    if module.startswith("triton.runtime") and type(value).__name__ in ("InterpretedFunction", "JITFunction"):
        return True  # triton.language's own jit functions (tl.zeros, tl.cdiv, ...)
    own = getattr(value, "__module__", "") or ""
    if inspect.ismodule(value):
        return value.__name__.startswith("triton.language")
    if isinstance(value, _CONSTANT_TYPES):
        return True
    return (own.startswith("triton.language") and callable(value)) or module.startswith("triton.language")


def allowed_attributes(modules: list[Any], classes: list[type]) -> frozenset[str]:
    """The public names of triton.language's modules and classes that reach triton objects."""
    names = set(INSTANCE_ATTRIBUTES) | {"math", "extra", "cuda", "libdevice"}
    for m in modules:
        for name, value in vars(m).items():
            if not name.startswith("_") and not inspect.ismodule(value) and _triton_object(value):
                names.add(name)
    for cls in classes:
        names.update(n for n in dir(cls) if not n.startswith("_"))
    return frozenset(names - DENIED_ATTRIBUTES)


def _codes(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _resolve(fn: types.FunctionType, name: str) -> Any:
    if name in fn.__globals__:
        return fn.__globals__[name]
    space = fn.__globals__.get("__builtins__", builtins)
    space = vars(space) if inspect.ismodule(space) else space
    return space.get(name, _MISSING) if isinstance(space, dict) else _MISSING


class _Checker:
    def __init__(self, snap: Snapshot):
        self.snap = snap
        self.seen: set[int] = set()
        self.found: list[str] = []

    def value(self, value: Any, where: str) -> None:
        if type(value) in _CONSTANT_TYPES or id(value) in self.snap.safe:
            return
        if type(value) in (tuple, list):
            for v in value:
                self.value(v, where)
            return
        tl = self.snap.tl
        if type(value) is tl.constexpr:
            self.value(value.value, where)
            return
        if isinstance(value, tl.dtype) and type(value).__module__.startswith("triton.language"):
            return
        if type(value) is tl.tensor or type(value) is getattr(tl, "tuple", None):  # a converted argument
            for v in value if type(value) is not tl.tensor else ():
                self.value(v, where)
            return
        if type(value) is self.snap.function_type:
            self.function(value)
            return
        self.found.append(f"{where} is {type(value).__name__} {str(value)[:60]!r}, not triton.language")

    def function(self, jit: Any) -> None:
        if id(jit) in self.seen:
            return
        self.seen.add(id(jit))
        name = getattr(jit, "__name__", "kernel")
        if type(jit) is self.snap.function_type:
            self.body(jit.fn, name)  # what a reduction's combine_fn runs
            self.body(jit.rewrite(), name)  # what a call runs: compiled again from its source
        else:
            self.body(jit, name)

    def body(self, fn: Any, name: str) -> None:
        if not isinstance(fn, types.FunctionType):
            self.found.append(f"kernel {name} runs a {type(fn).__name__}, not a function")
            return
        for i, cell in enumerate(fn.__closure__ or ()):
            try:
                self.value(cell.cell_contents, f"{name}: free variable {fn.__code__.co_freevars[i]}")
            except ValueError:  # an empty cell
                pass
        for value in [*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values()]:
            self.value(value, f"{name}: a default argument")
        for code in _codes(fn.__code__):
            for ins in dis.get_instructions(code):
                op, arg = ins.opname, ins.argval
                if op in _DENIED_OPS:
                    self.found.append(f"{name} line {ins.positions.lineno}: {op} {arg}")
                elif op in _ATTR_OPS and (arg.startswith("_") or arg not in self.snap.attributes):
                    self.found.append(f"{name} line {ins.positions.lineno}: reads attribute {arg!r}")
                elif op in _GLOBAL_OPS:
                    value = _resolve(fn, arg)
                    if value is _MISSING:
                        continue  # a NameError when it runs
                    self.value(value, f"{name}: global {arg}")


def freeze(snap: Snapshot, fn: types.FunctionType, memo: dict[int, Any] | None = None) -> types.FunctionType:
    """`fn` bound to a private copy of what it was checked against: its module's globals (one
    copy per module, its own jit functions frozen the same way), builtins reduced to the allowed
    ones, its closure cells and defaults. Code that runs later in the launch (the grid function,
    a pre-run hook) can then rebind nothing the body reads."""
    memo = {} if memo is None else memo
    if id(fn) in memo:
        return memo[id(fn)]
    space = memo.get(id(fn.__globals__))
    if space is None:
        space = memo[id(fn.__globals__)] = {}
        for key, value in list(fn.__globals__.items()):
            space[key] = _frozen_jit(snap, value, memo) if type(value) is snap.function_type else value
        space["__builtins__"] = {name: getattr(builtins, name) for name in ALLOWED_BUILTINS}
    cells = tuple(_cell(c) for c in fn.__closure__ or ()) or None
    frozen = types.FunctionType(fn.__code__, space, fn.__name__, fn.__defaults__, cells)
    frozen.__kwdefaults__ = dict(fn.__kwdefaults__) if fn.__kwdefaults__ else None
    memo[id(fn)] = frozen
    return frozen


def _cell(cell: Any) -> Any:
    try:
        return types.CellType(cell.cell_contents)
    except ValueError:  # an empty cell
        return types.CellType()


def _frozen_jit(snap: Snapshot, jit: Any, memo: dict[int, Any]) -> Any:
    """A jit function of the solution's, frozen: its own (original and rewritten) functions, with
    a private rewrite cache the solution cannot reach. triton.language's own stay themselves
    (the interpreter recognizes its reductions by identity; their modules are snapshot)."""
    if (getattr(jit.fn, "__module__", "") or "").startswith("triton."):
        return jit
    if id(jit) in memo:
        return memo[id(jit)]
    proxy = object.__new__(type(jit))
    memo[id(jit)] = proxy
    proxy.__dict__.update(vars(jit))
    rewritten = jit.rewrite()
    proxy.fn = freeze(snap, jit.fn, memo)
    proxy.rewritten_fn = {proxy.fn: freeze(snap, rewritten, memo)}  # shadows the class-wide cache
    return proxy


def check_launch(snap: Snapshot, fn: Any, name: str, args: tuple, kwargs: dict) -> list[str]:
    """Why the launch of body `fn` with these arguments may not run ([] when it may)."""
    checker = _Checker(snap)
    tampered = snap.tampered()
    if tampered:
        checker.found.append(f"triton.language or the interpreter was changed: {', '.join(tampered[:5])}")
    checker.body(fn, name)
    for i, arg in enumerate([*args, *kwargs.values()]):
        if isinstance(arg, torch.Tensor):
            if type(arg) not in (torch.Tensor, torch.nn.Parameter):
                checker.found.append(f"{name}: argument {i} is a {type(arg).__name__}, not a plain tensor")
        else:
            checker.value(arg, f"{name}: argument {i}")
    return list(dict.fromkeys(checker.found))
