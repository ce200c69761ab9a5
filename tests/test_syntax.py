"""Every parse of the package goes through `syntax.parse`, one thread at a time (CPython 3.11's
AST builder fails two threads parsing at once: gh-106905; two evaluations in a thread pool did)."""

from __future__ import annotations

import ast
import re
import threading
import time

from kernelbench_v3 import syntax
from tests.paths import PACKAGE


def test_parses_never_overlap(monkeypatch):
    inside, most = 0, 0
    guard = threading.Lock()
    real = ast.parse

    def slow_parse(source, filename="<unknown>"):
        nonlocal inside, most
        with guard:
            inside += 1
            most = max(most, inside)
        time.sleep(0.01)
        with guard:
            inside -= 1
        return real(source, filename=filename)

    monkeypatch.setattr(syntax.ast, "parse", slow_parse)
    threads = [threading.Thread(target=syntax.parse, args=("x = 1\n",)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most == 1
    assert isinstance(syntax.parse("def f():\n    return 1\n", "f.py"), ast.Module)


def test_the_package_parses_only_through_syntax():
    direct = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "syntax.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bast\.parse\(", line)
    ]
    assert not direct, direct
