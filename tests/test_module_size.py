"""No module over about 400 lines (the house rule; issue 29, point 15 split `serve/server.py`
and `runs/load.py` along their concepts; issue 39 split `evaluate/solution/worker.py` and
`evaluate/supervisor/tamper_scan.py`, the last two of `evaluate/` over it)."""

from __future__ import annotations

from tests.paths import PACKAGE

LIMIT = 400
NOT_YET: tuple[str, ...] = ()  # folders not yet held to the limit


def test_no_module_is_over_the_limit():
    over = {
        path.relative_to(PACKAGE).as_posix(): n
        for path in sorted(PACKAGE.rglob("*.py"))
        if not path.relative_to(PACKAGE).as_posix().startswith(NOT_YET)
        and (n := len(path.read_text(encoding="utf-8").splitlines())) > LIMIT
    }
    assert not over, f"modules over {LIMIT} lines: {over}"
