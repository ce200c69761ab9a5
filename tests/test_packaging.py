"""A non-editable build carries the problem files, the example solutions and the shipped facts,
and the package finds them without a checkout.

Runs setup.py's own build step (`build_py`, offline, no index) into a temp folder, then uses the
built package from a folder that is not a checkout. The full check (`pip install .` into a fresh
venv, then `kbv3 eval ... --device cpu` from /tmp) needs a package index and minutes; the
README's install section says how it was done.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelbench_v3.catalog import problem as catalog
from tests.paths import EXAMPLES, PACKAGE, PROBLEMS, REPO


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    pytest.importorskip("setuptools")
    lib = tmp_path_factory.mktemp("build_lib")
    proc = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(lib)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return lib / "kernelbench_v3"


def test_the_build_carries_problems_examples_and_facts(built):
    for source in sorted(PROBLEMS.glob("*/*.py")):
        copy = built / "_problems" / source.relative_to(PROBLEMS)
        assert copy.read_bytes() == source.read_bytes(), copy
    assert (built / "_problems" / "README.md").is_file()
    examples = sorted(p.relative_to(EXAMPLES) for p in EXAMPLES.glob("*/*.py"))
    assert examples and all((built / "_examples" / e).is_file() for e in examples)
    assert (built / "data" / "problem_facts.json").read_bytes() == (
        PACKAGE / "data" / "problem_facts.json"
    ).read_bytes()
    assert len(catalog.discover(built / "_problems")) == 60


def test_default_problems_dir_falls_back_to_the_bundled_copy(built, monkeypatch, tmp_path):
    monkeypatch.delenv("KBV3_PROBLEMS_DIR", raising=False)
    monkeypatch.setattr(catalog, "CHECKOUT_PROBLEMS", tmp_path / "no_checkout")
    monkeypatch.setattr(catalog, "BUNDLED_PROBLEMS", built / "_problems")
    assert catalog.default_problems_dir() == built / "_problems"
    monkeypatch.setattr(catalog, "BUNDLED_PROBLEMS", tmp_path / "not_installed")
    with pytest.raises(FileNotFoundError, match="KBV3_PROBLEMS_DIR"):
        catalog.default_problems_dir()


def test_the_built_package_works_outside_a_checkout(built, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "KBV3_PROBLEMS_DIR"}
    env["PYTHONPATH"] = str(built.parent)

    def kbv3(*args):
        return subprocess.run(
            [sys.executable, "-m", "kernelbench_v3.cli", *args], cwd=tmp_path, env=env, capture_output=True, text=True
        )

    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import kernelbench_v3, kernelbench_v3.cli.demo as d; print(kernelbench_v3.__file__); print(d.EXAMPLES_DIR)",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert where == [str(built / "__init__.py"), str(built / "_examples")]
    validate = kbv3("validate")
    assert validate.returncode == 0 and "60 problems" in validate.stdout
    wrong = kbv3(
        "eval",
        "--problem",
        "23_Softmax",
        "--solution",
        str(EXAMPLES / "level1" / "23_Softmax.py"),
    )
    assert wrong.returncode == 2 and "_problems; did you mean level1/23_Softmax?" in wrong.stderr
