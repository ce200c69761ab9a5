"""The benchmark scripts under benchmarks/ rehearse on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.paths import BENCHMARKS


@pytest.mark.slow
def test_bench_script_rehearses_on_cpu(tmp_path):
    out = tmp_path / "bench.md"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "bench" / "bench_evaluator_gpu.py"),
            "--device",
            "cpu",
            "--out",
            str(out),
            "--part",
            "baselines",
            "--problems",
            "level1/26_GELU_",
            "--no-compile",
            "--cache",
            str(tmp_path / "c"),
            "--timing-seconds",
            "0.5",
            "--workers",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = out.read_text()
    assert "| level1/26_GELU_ |" in text and "eager" in text
    rows = [json.loads(line) for line in (tmp_path / "bench.md.jsonl").read_text().splitlines()]
    assert rows[0]["part"] == "baselines" and rows[0]["eager_ms"] > 0
