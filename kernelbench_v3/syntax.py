"""Parsing Python source into an `ast` tree, safely from several threads at once.

CPython 3.11 builds the Python objects of an AST with one interpreter-wide recursion counter; two
threads parsing at once can corrupt it and one of them fails with `SystemError: AST constructor
recursion depth mismatch` (CPython issue gh-106905). `evaluate()` called from two threads (a
caller's thread pool) parsed problem and solution files at once and failed so. Every parse of
the package goes through `parse`, which holds one lock; a parse takes milliseconds.

A leaf: it imports nothing from the package, so every wing may use it.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse(source, filename)`, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename=filename)
