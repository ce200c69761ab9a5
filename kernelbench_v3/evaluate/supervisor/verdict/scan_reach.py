"""Reach rules of the static tamper scan: the obfuscated ways a solution reaches what the name rules
of tamper_scan watch for, so that hiding a module or a computed name from alias resolution is
itself a finding.

Owns three rules and one extension, each finding in tamper_scan's format (rule, line, text, why):
- `hidden_reach`: sys, os, builtins, torch._C, an imported module, or setattr/getattr/delattr/vars/
  globals/__import__ used as a plain value (put in a container, assigned, passed, returned:
  `m = [sys][0]`, `f = setattr`, `b = __builtins__`, `vars(builtins)`), `globals()` used as a
  mapping, and imports by a computed name (`importlib.import_module("sy" + "s")`). Attribute
  access, calls, tests, comparisons and annotations (`sys.version`, `setattr(self, "x", 1)`,
  `if triton is None`) stay fine.
- `dynamic_attribute`: getattr/setattr/delattr/hasattr and their twins (attrgetter, getattr_static,
  `__getattribute__`) with a name that is not a literal, a name bound only to literals
  (`for n in ("a", "b")`), or an f-string with a plain literal prefix (`f"p{i}"`).
- `torch_private`: `torch._C._*` outside an allow-list honest Triton/torch code uses, the dispatch
  and function-mode machinery (`torch.utils._python_dispatch`, `torch.overrides._*`,
  `TorchDispatchMode`/`TorchFunctionMode` and subclasses), `__torch_dispatch__`/`__torch_function__`.
- `evaluator_access` and `monkeypatching` (tamper_scan's rules): sys.modules walks reached through
  getattr or `__dict__`, and attribute writes through `type(x)`, `x.__class__`, `[cls][0]` or a
  name bound once to one of those.

A container alias that never touches one of these names (`d = {"t": torch.Tensor}; d["t"].add = f`)
still escapes a static reader; the sandbox and the supervisor remain the real defence.
"""

from __future__ import annotations

import ast
from collections import Counter, defaultdict
from typing import Any

from .scan_names import IMPORTERS

REACH_WHY: dict[str, str] = {
    "hidden_reach": "hides sys, os, builtins, a module or an attribute setter behind a container, alias or computed name",
    "dynamic_attribute": "gets, sets or probes an attribute whose name a static reader cannot see",
    "torch_private": "reaches torch's private C state or its dispatch and function-mode stacks",
}
# Values that reach anything once hidden from alias resolution (`builtins` also stands for __builtins__).
POWER = frozenset(
    "sys os builtins torch._C importlib importlib.import_module builtins.setattr builtins.getattr "
    "builtins.delattr builtins.__import__ builtins.vars builtins.globals builtins.locals "
    "builtins.object.__setattr__ builtins.object.__delattr__ builtins.object.__getattribute__ "
    "builtins.type.__setattr__ builtins.type.__getattribute__".split()
)
# Attribute functions by the index of their name argument.
_ATTR_FUNCS = {
    **dict.fromkeys(
        "builtins.getattr builtins.setattr builtins.delattr builtins.hasattr inspect.getattr_static "
        "builtins.object.__getattribute__ builtins.object.__setattr__ builtins.object.__delattr__ "
        "builtins.type.__getattribute__ builtins.type.__setattr__".split(),
        1,
    ),
    **dict.fromkeys(("operator.attrgetter", "operator.methodcaller"), 0),
}
_ATTR_METHODS = {"__getattribute__", "__getattr__", "__setattr__", "__delattr__"}
# torch._C members honest kernels use: current stream and device queries (Triton's own launcher
# reads _cuda_getCurrentRawStream), the op namespaces, the tracing probe of jit-friendly code.
TORCH_C_ALLOWED = frozenset(
    "_cuda_getCurrentRawStream _cuda_getCurrentStream _cuda_getDevice _cuda_getDeviceCount "
    "_cuda_getArchFlags _get_tracing_state _nn _fft _linalg _special _LinAlgError".split()
)
_TORCH_PRIVATE = (
    "torch.utils._python_dispatch",
    "torch.overrides._",
    "torch._C.DisableTorchFunction",
    "torch._C.DispatchKey",
)
_MODES = ("TorchDispatchMode", "TorchFunctionMode")
_MODE_HOOKS = {"__torch_dispatch__", "__torch_function__"}


def _literal(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def torch_private(full: str) -> bool:
    parts = full.split(".")
    if full.startswith("torch._C._") and parts[2] not in TORCH_C_ALLOWED:
        return True
    return full.startswith(_TORCH_PRIVATE) or parts[-1] in _MODES


def check(scanner: Any) -> None:
    """Add the reach findings to a tamper_scan._Scanner (its tree, parents, aliases and qualname)."""
    _Reach(scanner).run()


class _Reach:
    def __init__(self, scanner: Any):
        self.s = scanner
        self.modules = {
            a.asname or a.name.split(".")[0]
            for node in ast.walk(scanner.tree)
            if isinstance(node, ast.Import)
            for a in node.names
        }
        # Names bound only to string literals (once, or as a loop over literals) read as literals.
        sites: dict[str, list[bool]] = defaultdict(list)
        binds: Counter[str] = Counter()
        for node in ast.walk(scanner.tree):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                binds[node.id] += 1
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                binds[node.name] += 1
            elif isinstance(node, ast.arg):
                binds[node.arg] += 1
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                sites[node.targets[0].id].append(_literal(node.value))
            elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name):
                items = getattr(node.iter, "elts", None)
                sites[node.target.id].append(items is not None and all(_literal(e) for e in items))
        self.constants = {n for n, ok in sites.items() if all(ok) and len(ok) == binds[n]}
        self.classes: set[str] = set()  # `cls = type(x)` once: cls stands for an opaque class
        for node in ast.walk(scanner.tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if binds[node.targets[0].id] == 1 and self._opaque_class(node.value):
                    self.classes.add(node.targets[0].id)

    def run(self) -> None:
        for node in ast.walk(self.s.tree):
            if self._reach_value(node) and not self._harmless(node):  # also globals()["sys"]
                self.s.add("hidden_reach", node)
            if isinstance(node, (ast.Name, ast.Attribute)):
                if (full := self.s.qualname(node)) and torch_private(full):
                    self.s.add("torch_private", node)
                if not isinstance(node.ctx, ast.Load) and self._opaque_class(getattr(node, "value", None)):
                    self.s.add("monkeypatching", node)  # type(x).add = f
            elif isinstance(node, ast.ImportFrom) and not node.level:
                if any(torch_private(f"{node.module}.{a.name}") for a in node.names):
                    self.s.add("torch_private", node)
            elif isinstance(node, ast.Import) and any(torch_private(a.name) for a in node.names):
                self.s.add("torch_private", node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in _MODE_HOOKS:
                self.s.add("torch_private", node)
            elif isinstance(node, ast.Call):
                self._call(node)
            if isinstance(node, (ast.Subscript, ast.Call)) and self.s.qualname(node) == "sys.modules":
                self.s._sys_modules(node)  # getattr(sys, "modules") or sys.__dict__["modules"]

    def _reach_value(self, node: ast.AST) -> bool:
        if not isinstance(node, (ast.Name, ast.Attribute, ast.Call)) or isinstance(
            getattr(node, "ctx", None), (ast.Store, ast.Del)
        ):
            return False
        if isinstance(node, ast.Call) and not node.args and not node.keywords:
            return self.s.qualname(node.func) in ("builtins.globals", "builtins.locals", "builtins.vars")
        full = self.s.qualname(node)
        if full is None:
            return False
        if full in POWER or (isinstance(node, ast.Name) and node.id in self.modules):
            return True
        return isinstance(node, ast.Attribute) and node.attr == "__dict__" and self._reach_value(node.value)

    def _in_test(self, node: ast.AST) -> bool:
        parent = self.s.parent.get(node)
        if isinstance(parent, (ast.If, ast.While, ast.IfExp, ast.Assert)) and parent.test is node:
            return True
        if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not):
            return True
        return isinstance(parent, ast.BoolOp) and self._in_test(parent)

    def _harmless(self, node: ast.AST) -> bool:
        """Uses that keep the name visible: attribute access, a call, a test, a comparison, an annotation."""
        parent = self.s.parent.get(node)
        if isinstance(parent, ast.arg) or node in (getattr(parent, "returns", 0), getattr(parent, "annotation", 0)):
            return True  # an annotation
        if isinstance(parent, (ast.Attribute, ast.Compare, ast.Expr)) or self._in_test(node):
            return not (isinstance(parent, ast.Attribute) and parent.attr == "__dict__")
        if isinstance(parent, ast.Call):
            return parent.func is node or (
                bool(parent.args) and parent.args[0] is node and self.s.qualname(parent.func) in _ATTR_FUNCS
            )
        return False

    def _static_name(self, node: ast.AST) -> bool:
        if _literal(node) or (isinstance(node, ast.Name) and node.id in self.constants):
            return True
        if isinstance(node, ast.JoinedStr) and node.values and _literal(node.values[0]):
            return not node.values[0].value.startswith("_")  # f"p{i}" cannot spell a dunder
        return False

    def _opaque_class(self, node: ast.AST | None) -> bool:
        """A receiver that stands for a class behind a call or container: type(x), x.__class__, [cls][0]."""
        if isinstance(node, ast.Call):
            return self.s.qualname(node.func) == "builtins.type" and len(node.args) == 1
        if isinstance(node, ast.Attribute):
            return node.attr == "__class__"
        if isinstance(node, ast.Name):
            return node.id in self.classes
        return isinstance(node, ast.Subscript) and isinstance(node.value, (ast.List, ast.Tuple, ast.Dict, ast.Set))

    def _call(self, node: ast.Call) -> None:
        func, args = self.s.qualname(node.func), node.args
        if func in _ATTR_FUNCS:
            at = _ATTR_FUNCS[func]
            names = args[at:] if func.startswith("operator.") else args[at : at + 1]
            if any(not self._static_name(a) for a in names) or any(isinstance(a, ast.Starred) for a in args):
                self.s.add("dynamic_attribute", node)
            if func in ("builtins.setattr", "builtins.delattr") and args and self._opaque_class(args[0]):
                self.s.add("monkeypatching", node)
        elif func is None and isinstance(node.func, ast.Attribute) and node.func.attr in _ATTR_METHODS:
            if args and not self._static_name(args[0]):
                self.s.add("dynamic_attribute", node)  # x.__getattribute__(name)
        elif func in IMPORTERS and args and not _literal(args[0]):
            self.s.add("hidden_reach", node)
