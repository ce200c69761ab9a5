"""The dependency ranges are ones CI has run (issue 29, point 16): every floor in pyproject.toml
is the exact version requirements-ci.txt installs (torch and triton: the H200 image's), the Triton internal that the evaluator wraps
is behind an upper bound, and a hanging test fails on its own (pytest-timeout)."""

from __future__ import annotations

import re

import pytest

from tests.paths import REPO

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PINS = {
    name.lower().replace("_", "-"): version
    for name, version in re.findall(r"^([A-Za-z0-9_.-]+)==([^\s#]+)", (REPO / "requirements-ci.txt").read_text(), re.M)
}


# torch and triton also run on the H200 image (benchmarks/results/calls_gpu.md): their floors are
# those versions, so `pip install .` into that CUDA environment keeps its torch.
GPU_RUNS = {"torch": "2.11", "triton": "3.6"}


def _floors(requirements: list[str]) -> dict[str, str]:
    found = {}
    for requirement in requirements:
        match = re.match(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9][^,;\s]*)", requirement)
        assert match, f"{requirement!r}: every dependency has a floor"
        found[match.group(1).lower().replace("_", "-")] = match.group(2)
    return found


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])


def test_every_floor_is_a_version_ci_installs():
    project = PYPROJECT["project"]
    requirements = list(project["dependencies"])
    for extra in ("ray", "notebooks", "test"):
        requirements += project["optional-dependencies"][extra]
    floors = _floors(requirements)
    assert set(floors) <= set(PINS), f"pinned for CI: {sorted(set(floors) - set(PINS))}"
    for name, floor in floors.items():
        pin = _release(PINS[name])
        assert _release(floor) <= pin, f"{name}: floor {floor} above the CI pin {PINS[name]}"
        if name in GPU_RUNS:  # the GPU image's versions, run by benchmarks/ on the H200
            assert _release(floor)[:2] == _release(GPU_RUNS[name])[:2], f"{name}: floor {floor}"
        else:
            assert _release(floor)[:2] == pin[:2], f"{name}: floor {floor}, but CI runs only {PINS[name]}"


def test_triton_is_capped_below_the_next_minor():
    triton = next(r for r in PYPROJECT["project"]["dependencies"] if r.startswith("triton"))
    pin = _release(PINS["triton"])
    assert f"<{pin[0]}.{pin[1] + 1}" in triton.replace(" ", "")


def test_a_hanging_test_times_out(pytestconfig):
    assert "pytest-timeout" in PINS
    assert float(pytestconfig.getini("timeout")) > 0
