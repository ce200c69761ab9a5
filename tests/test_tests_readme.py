"""tests/README.md names only files that exist (issue 41, item 8: it named `test_timing.py` and
`evaluate/timing.py` after both were gone): every `test_*.py`, `*.py` path and folder it names
is looked up, a test file in the folder of its table row."""

from __future__ import annotations

import re

from tests.paths import REPO, TESTS

PAGE = (TESTS / "README.md").read_text(encoding="utf-8")


def test_every_file_the_page_names_exists():
    missing = []
    for path in re.findall(r"`((?:tests|kernelbench_v3)/[\w/]+\.py)`", PAGE):
        if not (REPO / path).is_file():
            missing.append(path)
    for row in re.findall(r"^\| `(\w+)/` \|(.*)$", PAGE, re.M):
        folder, text = row
        for name in re.findall(r"`(\w+\.py)`", text):
            if not (TESTS / folder / name).is_file():
                missing.append(f"tests/{folder}/{name}")
    for name in re.findall(r"`(test_\w+\.py)`", PAGE.split("| folder |")[0]):
        if not list(TESTS.rglob(name)):
            missing.append(name)
    assert not missing, f"tests/README.md names files that do not exist: {missing}"
