"""`kernelbench_v3.evaluate` is the seam every other wing goes through (tests/test_imports.py
holds them to it): every name it offers resolves, to the one definition inside, and the names
that need no torch load without it."""

from __future__ import annotations

import subprocess
import sys

import pytest

import kernelbench_v3.evaluate as api
from kernelbench_v3.evaluate.supervisor import reference, run, verdict
from tests.paths import REPO


def test_every_public_name_resolves_to_the_definition_inside():
    for name in api.__all__:
        assert getattr(api, name) is not None, name
    assert api.fill_baselines is reference.fill_baselines and api.BaselineResult is reference.BaselineResult
    assert api.keep_references_warm is reference.keep_references_warm
    assert api.keep_zygotes_warm is run.keep_zygotes_warm and api.start_warm_zygote is run.start_warm_zygote
    assert api.close_warm_zygotes is run.close_warm_zygotes
    assert (api.V3_TOLERANCE, api.PRECISION_MARGIN) == (verdict.V3_TOLERANCE, verdict.PRECISION_MARGIN)
    assert api.MAIN_WORK_SHARE == verdict.MAIN_WORK_SHARE
    with pytest.raises(AttributeError, match="no attribute 'clock'"):
        api.clock  # noqa: B018 - an unknown name is an AttributeError, as on any module


def test_the_light_names_load_without_torch():
    script = (
        "import sys\n"
        "from kernelbench_v3.evaluate import EvalRequest, Link, Record, describe_record, device_name, mps_wanted\n"
        "from kernelbench_v3.evaluate import Wall, close_warm_zygotes, mps_starting, process_started\n"
        "from kernelbench_v3.evaluate import start_warm_zygote  # so a CLI launches its zygote before torch\n"
        "assert 'torch' not in sys.modules, 'the public API imported torch'\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
