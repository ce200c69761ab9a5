"""Static tamper scan of a solution's source: the idioms a solution uses to attack the evaluator
from inside its own process, each reported as a named finding with the offending line.

Owns the scanner over the rule table of `scan_rules` (frame and gc introspection, reaching the
evaluator's modules, monkeypatching, torch global flags, process control (torch.multiprocessing and the pty calls included), threads,
network, dynamic code (every importer and loader, pkgutil.resolve_name included), native code,
file writes, torch.compile, environment writes) and the alias resolution it needs (`import sys as
s`, `from inspect import currentframe as cf`, `t = time`, `getattr(sys, "_getframe")`, and names
built from literals, which scan_names spells out). A finding fails the `source_scan` check, so the
verdict rejects the solution.

This is defence in depth and never the only defence: the solution runs in a sandboxed child and
the trusted supervisor decides every verdict, because a determined author can always hide an idiom
from a static reader (the `dynamic_code` rule and the obfuscated-reach rules of scan_reach only
narrow that gap). It reads the source and never runs it. Honest kernel code (torch, triton, math,
functools, typing, os.environ reads, `load_inline` CUDA sources) must not trip it. One finding per
rule per line, ordered by line.
"""

from __future__ import annotations

import ast
import builtins
from collections import Counter
from dataclasses import dataclass

from .... import syntax
from . import scan_names, scan_reach
from .scan_rules import (
    ATTRS,
    BUILD_ENV,
    ENVIRON,
    MUTATORS,
    NATIVE_TEXT,
    OPENERS,
    OS_WRITE_FLAGS,
    PATH_MOVES,
    PATH_WRITES,
    RULE_RE,
    SETTERS,
    TWINS,
    WHY,
    WRITE_MODE,
)


@dataclass(frozen=True)
class Finding:
    rule: str
    line: int  # 1-based
    text: str  # the offending source line, stripped, at most 160 characters
    why: str


@dataclass(frozen=True)
class TamperScan:
    findings: tuple[Finding, ...]
    parsed: bool

    @property
    def ok(self) -> bool:
        return not self.findings

    def summary(self) -> str:
        if not self.findings:
            return "no tampering idioms found"
        f = self.findings[0]
        more = f"; +{len(self.findings) - 1} more" if len(self.findings) > 1 else ""
        return f"line {f.line}: {f.text} ({f.rule}: {f.why}){more}"


def scan(source: str) -> TamperScan:
    lines = source.splitlines()
    try:
        tree = syntax.parse(source)
    except (SyntaxError, ValueError) as exc:  # ValueError: null bytes in the source
        line = getattr(exc, "lineno", None) or 1
        text = lines[line - 1].strip()[:160] if 0 < line <= len(lines) else ""
        return TamperScan((Finding("unparseable", line, text, WHY["unparseable"]),), parsed=False)
    return TamperScan(_Scanner(tree, lines).run(), parsed=True)


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _twin(name: str) -> str:
    root, dot, rest = name.partition(".")
    return TWINS.get(root, root) + dot + rest


def _patch_rule(target: str) -> str:
    # torch.backends flags swap no code, but change the numerics of every kernel in the process.
    return "global_flags" if target.startswith("torch.backends.") else "monkeypatching"


def _evaluator_key(node: ast.AST) -> bool:
    """A sys.modules key that names the evaluator, or one the scan cannot read (assume the worst)."""
    return (key := _literal(node)) is None or key == "__main__" or key.startswith("kernelbench_v3")


class _Scanner:
    def __init__(self, tree: ast.Module, lines: list[str]):
        self.tree, self.lines = tree, lines
        self.found: dict[tuple[str, int], Finding] = {}
        self.alias: dict[str, str] = {}  # local name -> dotted name it stands for
        self.parent: dict[ast.AST, ast.AST] = {}
        self.docstrings: set[int] = set()
        self.paths: set[str] = set()  # names bound to pathlib objects
        self.stars: list[str] = []  # modules imported with `from m import *`
        binds: Counter[str] = Counter()
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for name, target, _ in self._imported(node):
                    self.alias[name] = target
                    if name == "*":
                        self.stars.append(target[:-2])
            elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                binds[node.id] += 1
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.arg)):
                binds[node.arg if isinstance(node, ast.arg) else node.name] += 1
            elif isinstance(node, ast.Expr) and _literal(node.value) is not None:
                self.docstrings.add(id(node.value))
        self.bound = set(binds)
        # Names bound once, with the value bound (scan_names folds strings through them).
        self.single: dict[str, ast.AST] = {
            node.targets[0].id: node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and binds[node.targets[0].id] == 1
        }
        # `t = time` once in the module makes t another name for time; a name rebound elsewhere
        # is a local variable, and treating it as an alias would flag honest code.
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                name = node.targets[0].id
                if binds[name] == 1 and name not in self.alias:
                    full = self.qualname(node.value)
                    if full is not None:
                        self.alias[name] = full
                    elif self._pathy(node.value):
                        self.paths.add(name)

    @staticmethod
    def _imported(node: ast.Import | ast.ImportFrom):
        """(local name, what it stands for, full name imported) for each name the import binds."""
        if isinstance(node, ast.Import):
            for a in node.names:
                local = a.asname or a.name.split(".")[0]
                yield local, _twin(a.name if a.asname else local), _twin(a.name)
        else:
            base = "." * node.level + (node.module or "")
            for a in node.names:
                full = _twin(f"{base}.{a.name}" if node.module else base + a.name)
                yield a.asname or a.name, full, full

    def qualname(self, node: ast.AST) -> str | None:
        """The dotted name an expression stands for (`s._getframe` -> `sys._getframe`), else None."""
        if isinstance(node, ast.Name):
            if node.id in self.alias or node.id == "__builtins__":
                return self.alias.get(node.id, "builtins")
            if node.id in self.bound:
                return None
            for full in (f"{module}.{node.id}" for module in self.stars):
                if any(rule.match(full) for rule in RULE_RE.values()):
                    return full  # `from os import *` then `_exit(0)`
            return "builtins." + node.id if hasattr(builtins, node.id) else None
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Subscript) and _literal(node.slice):
            if self.qualname(node.value) == "sys.modules":
                return _twin(node.slice.value)
            base = self.qualname(node.value.value) if isinstance(node.value, ast.Attribute) else None
            return f"{base}.{node.slice.value}" if base and node.value.attr == "__dict__" else None
        if isinstance(node, ast.Call) and node.args:
            func = self.qualname(node.func)
            if func == "builtins.getattr" and len(node.args) > 1 and _literal(node.args[1]):
                base = self.qualname(node.args[0])
                return f"{base}.{node.args[1].value}" if base else None
            if func == "sys.modules.get" and _literal(node.args[0]):
                return _twin(node.args[0].value)
            if name := scan_names.imported_name(node, self):  # also names built from literals
                return _twin(name)
        return None

    def add(self, rule: str, node: ast.AST, line: int | None = None) -> None:
        line = line or node.lineno
        text = self.lines[line - 1].strip()[:160] if 0 < line <= len(self.lines) else ""
        self.found.setdefault((rule, line), Finding(rule, line, text, WHY[rule]))

    def add_names(self, name: str, node: ast.AST) -> None:
        for rule, pattern in RULE_RE.items():
            if pattern.match(name):
                self.add(rule, node)

    def run(self) -> tuple[Finding, ...]:
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if isinstance(node, ast.ImportFrom) and node.level:
                    self.add("evaluator_access", node)  # a lone solution file has no package of its own
                for _, _, full in self._imported(node):
                    self.add_names(full, node)
            elif isinstance(node, (ast.Name, ast.Attribute)):
                key = node.attr if isinstance(node, ast.Attribute) else node.id
                if key in ATTRS and (isinstance(node, ast.Attribute) or key == "__builtins__"):
                    self.add(ATTRS[key], node)
                full = self.qualname(node)
                if full:
                    self.add_names(full, node)
                    if full == "sys.modules":
                        self._sys_modules(node)
                base = self.qualname(node.value) if isinstance(node, ast.Attribute) else None
                if base and not isinstance(node.ctx, ast.Load):
                    self.add(_patch_rule(f"{base}.{node.attr}"), node)
            elif isinstance(node, (ast.Subscript, ast.Call)):
                if full := self.qualname(node):  # getattr(sys, "_getframe")(1), builtins.__dict__["exec"]
                    self.add_names(full, node)
                if isinstance(node, ast.Call):
                    self._call(node)
                elif not isinstance(node.ctx, ast.Load):
                    self._subscript_write(node)
            elif _literal(node) is not None and id(node) not in self.docstrings:
                self.check_text(node, node.value)
        scan_reach.check(self)
        scan_names.check(self)
        return tuple(sorted(self.found.values(), key=lambda f: (f.line, f.rule)))

    def _is_module(self, node: ast.AST) -> bool:
        full = self.qualname(node)
        return full is not None and (full == "builtins" or not full.startswith("builtins."))

    def _namespace(self, node: ast.AST) -> str | None:
        """The rule a write into this mapping breaks: a module's `__dict__`/`vars()`, or globals()."""
        if isinstance(node, ast.Attribute) and node.attr == "__dict__" and self.qualname(node.value):
            return "monkeypatching"
        if isinstance(node, ast.Call):
            func = self.qualname(node.func)
            if func == "builtins.vars" and node.args:
                return "monkeypatching" if self.qualname(node.args[0]) else None
            if func in ("builtins.vars", "builtins.globals"):
                return "dynamic_code"
        return None

    def _pathy(self, node: ast.AST) -> bool:
        return any(
            (isinstance(n, ast.Call) and (self.qualname(n.func) or "").startswith("pathlib."))
            or (isinstance(n, ast.Name) and n.id in self.paths)
            for n in ast.walk(node)
        )

    def _subscript_write(self, node: ast.Subscript) -> None:
        if self.qualname(node.value) in ENVIRON:
            if _literal(node.slice) not in BUILD_ENV:
                self.add("environment", node)
        elif rule := self._namespace(node.value):
            self.add(rule, node)

    def _sys_modules(self, node: ast.AST) -> None:
        parent = self.parent.get(node)
        if isinstance(parent, ast.Compare) and parent.left is not node:
            return  # `"triton" in sys.modules`
        if isinstance(parent, ast.Subscript) and parent.value is node:
            if isinstance(parent.ctx, ast.Load) and not _evaluator_key(parent.slice):
                return
        elif isinstance(parent, ast.Attribute) and parent.attr == "get":
            call = self.parent.get(parent)
            if isinstance(call, ast.Call) and call.func is parent and call.args and not _evaluator_key(call.args[0]):
                return
        self.add("evaluator_access", node)

    @staticmethod
    def _env_write_allowed(method: str, call: ast.Call) -> bool:
        if method == "update":
            keys = [k.arg for k in call.keywords] + [_literal(k) for a in call.args for k in getattr(a, "keys", [None])]
        elif method in ("setdefault", "__setitem__", "pop", "__delitem__") and call.args:
            keys = [_literal(call.args[0])]
        else:
            keys = [None]
        return all(k in BUILD_ENV for k in keys)

    def _call(self, node: ast.Call) -> None:
        func, args = self.qualname(node.func), node.args
        if func in SETTERS and args and (base := self.qualname(args[0])):
            name = _literal(args[1]) if len(args) > 1 else None
            self.add(_patch_rule(f"{base}.{name}"), node)
            if name is None and self._is_module(args[0]):
                self.add("dynamic_code", node)
        elif func == "builtins.getattr" and len(args) > 1 and _literal(args[1]) is None and self._is_module(args[0]):
            self.add("dynamic_code", node)
        elif func in OPENERS:
            mode = args[1] if len(args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
            if mode is not None and (_literal(mode) is None or WRITE_MODE.fullmatch(_literal(mode))):
                self.add("file_writes", node)
        elif func == "os.open":
            flags = {
                n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", None)
                for arg in args[1:2]
                for n in ast.walk(arg)
            }
            if flags & OS_WRITE_FLAGS:
                self.add("file_writes", node)
        if not isinstance(node.func, ast.Attribute):
            return
        method, receiver = node.func.attr, node.func.value
        if method in PATH_WRITES or (method in PATH_MOVES and self._pathy(receiver)):
            self.add("file_writes", node)
        elif method == "open" and func is None and args and WRITE_MODE.fullmatch(_literal(args[0]) or ""):
            self.add("file_writes", node)  # Path(...).open("w")
        elif method in MUTATORS:
            if self.qualname(receiver) in ENVIRON:
                if not self._env_write_allowed(method, node):
                    self.add("environment", node)
            elif rule := self._namespace(receiver):
                self.add(rule, node)

    def check_text(self, node: ast.AST, text: str) -> None:
        """The rules a string's text breaks, wherever the string comes from (a literal, or one
        scan_names folded from pieces)."""
        if "kernelbench_v3" in text:
            self.add("evaluator_access", node)
        if match := NATIVE_TEXT.search(text):
            # Report the line of the C source that holds the token, not the string's first line.
            end = getattr(node, "end_lineno", None) or node.lineno
            line = next(
                (
                    i
                    for i in range(node.lineno, end + 1)
                    if i <= len(self.lines) and match.group(0) in self.lines[i - 1]
                ),  # a folded string's token is on no line: then its first line
                node.lineno,
            )
            self.add("native_code", node, line)
