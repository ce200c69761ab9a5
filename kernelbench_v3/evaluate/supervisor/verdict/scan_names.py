"""Computed names for the static tamper scan: the strings a solution builds from literals, so
that a name or path split to hide it reads as the whole it spells.

Owns `fold` (the string an expression spells, or None) and the checks that use it, each in
tamper_scan's format (rule, line, text, why):
- text rules on built strings: `"/pr" + "oc"`, `"/".join(["", "proc"])`, f-strings, `%` and
  `.format`, `chr(112)`, slices, `Path("/") / "proc"`, `os.path.join`, names bound once to any of
  these, all read like a literal would (`native_code` for `/proc`, `ptrace`, `dlsym`...);
- imports by name (`pkgutil.resolve_name`, `importlib.import_module`, `__import__`): a name that
  folds is checked as the module or attribute it names (`resolve_name("o" + "s:fork")` is
  `os.fork`); one that does not is `hidden_reach` (scan_reach);
- native symbol lookups by computed name: `libc["pt" + "race"]`, `libc[name]`,
  `getattr(libc, name)` on a handle from ctypes are `native_code`.

What it cannot fold (bytes decoded through codecs, a name read from a file, arithmetic on
characters in a loop) stays hidden from it; the sandbox and the supervisor remain the defence.
"""

from __future__ import annotations

import ast
import posixpath
from typing import Any

UNKNOWN = "\0"  # a piece of a partly built string that is not a literal
MAX_DEPTH = 20  # names bound to names: a chain this long is not worth following
_PATHS = ("pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath", "pathlib.PurePosixPath", "os.path.join")
_SEPARATORS = {"os.sep": "/", "os.path.sep": "/", "os.curdir": ".", "os.pardir": ".."}
# Functions that take a module or object name (first argument) and return what it names.
IMPORTERS = frozenset(
    {
        "builtins.__import__",
        "importlib.import_module",
        "importlib.__import__",
        "importlib.util.find_spec",
        "pkgutil.resolve_name",
        "pkgutil.get_loader",
        "pkgutil.find_loader",
    }
)
_GETTERS = ("builtins.getattr", "builtins.hasattr", "inspect.getattr_static")


def fold(node: ast.AST | None, s: Any, depth: int = 0, partial: bool = False) -> str | None:
    """The string `node` spells when every piece of it is a literal, else None. `s` is the
    tamper_scan._Scanner (its names bound once, `single`, and `qualname`). With `partial`, a
    piece that is not a literal reads as UNKNOWN instead (`"/pr" + "oc/" + str(pid)` spells
    "/proc/\\0"), which is enough for the text rules and never used as a name."""
    if node is None or depth > MAX_DEPTH:
        return None
    d = depth + 1

    def piece(n: ast.AST | None) -> str | None:
        text = fold(n, s, d, partial)
        return UNKNOWN if text is None and partial else text

    if isinstance(node, ast.Constant):
        if isinstance(node.value, bytes):
            return node.value.decode("latin-1")
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.Name):
        return fold(s.single.get(node.id), s, d, partial) if node.id in s.single else None
    if isinstance(node, ast.Attribute):
        return _SEPARATORS.get(s.qualname(node) or "")
    if isinstance(node, ast.JoinedStr):
        if any(isinstance(v, ast.FormattedValue) and (v.conversion != -1 or v.format_spec) for v in node.values):
            return None  # f"{x!r}", f"{x:>9}": not worth spelling out
        parts = [piece(v.value if isinstance(v, ast.FormattedValue) else v) for v in node.values]
        return None if None in parts else "".join(parts)
    if isinstance(node, ast.BinOp):
        left, right = piece(node.left), piece(node.right)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Div):
            return posixpath.join(left, right)
        if isinstance(node.op, ast.Mod):
            return _safe(lambda: left % right)
        return None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        text, bounds = fold(node.value, s, d), [_int(b) for b in (node.slice.lower, node.slice.upper, node.slice.step)]
        return None if text is None or "bad" in bounds else _safe(lambda: text[slice(*bounds)])
    if isinstance(node, ast.Call):
        return _call(node, s, piece)
    return None


def _call(node: ast.Call, s: Any, piece: Any) -> str | None:
    func = s.qualname(node.func) or ""
    if func == "builtins.chr" and len(node.args) == 1 and _int(node.args[0]) not in (None, "bad"):
        return _safe(lambda: chr(_int(node.args[0])))
    if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
        return None
    if func in ("builtins.str", *_PATHS) and node.args:
        args = [piece(a) for a in node.args]
        return None if None in args else args[0] if func == "builtins.str" else posixpath.join(*args)
    if not isinstance(node.func, ast.Attribute):
        return None
    method, base = node.func.attr, piece(node.func.value)
    if base is None or base == UNKNOWN:
        return None
    if method == "join" and len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple)):
        items = [piece(e) for e in node.args[0].elts]
        return None if None in items else base.join(items)
    args = [piece(a) for a in node.args]
    if None in args:
        return None
    if method == "joinpath":  # Path("/").joinpath("proc")
        return posixpath.join(base, *args)
    if method in ("decode", "encode"):  # bytes literals are folded decoded already
        return base
    if method in ("format", "lower", "upper", "strip", "replace"):
        return _safe(lambda: getattr(base, method)(*args))
    return None


def _int(node: ast.AST | None) -> int | str | None:
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -node.operand.value if isinstance(node.operand.value, int) else "bad"
    return "bad"


def _safe(make: Any) -> str | None:
    try:
        out = make()
    except (TypeError, ValueError, IndexError, KeyError, OverflowError):
        return None
    return out if isinstance(out, str) else None


def imported_name(node: ast.Call, s: Any) -> str | None:
    """The dotted name an importer call reaches (`resolve_name("o" + "s:fork")` -> `os.fork`)."""
    if s.qualname(node.func) not in IMPORTERS or not node.args:
        return None
    name = fold(node.args[0], s)
    return name.replace(":", ".").strip(".") if name else None


def check(s: Any) -> None:
    """Add the computed-name findings to a tamper_scan._Scanner."""
    handles = _native_handles(s)
    for node in ast.walk(s.tree):
        # Built strings only: a plain literal is tamper_scan's, a name is read where it is bound.
        if isinstance(node, (ast.BinOp, ast.JoinedStr, ast.Call, ast.Subscript)):
            text = fold(node, s, partial=True)
            if text is not None and text.strip(UNKNOWN):
                s.check_text(node, text)
        if isinstance(node, ast.Call) and (name := imported_name(node, s)):
            s.add_names(name, node)  # resolve_name("o" + "s:fork") is os.fork
        if isinstance(node, ast.Subscript) and _is_handle(node.value, s, handles):
            if not isinstance(node.slice, ast.Constant):
                s.add("native_code", node)  # libc["pt" + "race"], libc[name]: a symbol hidden from a reader
        elif isinstance(node, ast.Call) and s.qualname(node.func) in _GETTERS and len(node.args) > 1:
            if _is_handle(node.args[0], s, handles) and not isinstance(node.args[1], ast.Constant):
                s.add("native_code", node)  # getattr(libc, name)


def _native_handles(s: Any) -> set[str]:
    """Names bound once to a ctypes library or one of its functions."""
    return {name for name, value in s.single.items() if _is_handle(value, s, set())}


def _is_handle(node: ast.AST, s: Any, handles: set[str]) -> bool:
    if isinstance(node, ast.Name) and node.id in handles:
        return True
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Subscript):
        return _is_handle(node.value, s, handles)
    full = s.qualname(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
    return bool(full) and (full == "ctypes" or full.startswith("ctypes."))
