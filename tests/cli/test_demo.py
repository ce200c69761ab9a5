"""The demo (issue 22, point 9): every bundled example of the split is evaluated on CPU, each
evaluation announced and followed by progress lines, and no CPU time is printed as a speedup."""

from __future__ import annotations

import time

import pytest

from kernelbench_v3.cli import demo
from kernelbench_v3.evaluate import Record


@pytest.mark.slow  # builds and loads the dataset
def test_demo_evaluates_every_example_on_cpu_and_is_never_silent(tmp_path, monkeypatch):
    seen = []

    def fake_evaluate(request, **kwargs):
        seen.append(request)
        time.sleep(0.35)  # a slow evaluation: the heartbeat must speak meanwhile
        return Record(
            problem_id=request.problem_id,
            status="correct",
            correct=True,
            device="cpu",
            timing_method="cpu_wall_clock",
            timing_meaningful=False,
            sol_ms=40.0,
            kernel_names=["k"],
        )

    monkeypatch.setattr("kernelbench_v3.evaluate.evaluate", fake_evaluate)
    monkeypatch.setattr(demo, "HEARTBEAT_S", 0.1)
    zygotes: list[str] = []  # one warm zygote for all six, launched before the build, closed after
    monkeypatch.setattr("kernelbench_v3.evaluate.start_warm_zygote", lambda d: zygotes.append(f"{d} at {len(seen)}"))
    monkeypatch.setattr("kernelbench_v3.evaluate.close_warm_zygotes", lambda: zygotes.append(f"closed at {len(seen)}"))
    lines: list[str] = []
    records = demo.run_demo(tmp_path / "out", device="cpu", say=lines.append)
    assert zygotes == ["cpu at 0", "closed at 6"]
    expected = list(demo.example_solutions())  # all six are in the h100 split
    assert [r.problem_id for r in seen] == expected and len(seen) == 6
    assert all(not r.baseline and r.device == "cpu" for r in seen)  # no baseline to score on CPU
    assert len(records) == 6
    text = "\n".join(lines)
    assert "evaluating 6 bundled example solution(s) on cpu" in text and "no speedup" in text
    for number, pid in enumerate(expected, start=1):
        assert f"({number}/6) {pid} ..." in text
    assert text.count("still running") >= 6
    assert "speedup: n/a on CPU (interpreter timing tests the machinery)" in text
    assert "0.000x" not in text
    assert "6 of 6 correct" in text


def _fake_evaluate(request, **kwargs):
    return Record(
        problem_id=request.problem_id,
        status="correct",
        correct=True,
        device="cpu",
        timing_method="cpu_wall_clock",
        timing_meaningful=False,
        sol_ms=40.0,
        kernel_names=["k"],
    )


@pytest.mark.slow  # builds and loads the dataset twice
def test_a_demo_rerun_replaces_its_records_and_datasets_stays_quiet(tmp_path, monkeypatch, capfd):
    """Issue 33, item 6: a second `kbv3 demo --out out` leaves one record per example (no
    duplicates for `report` to drop), and no "Generating ... split" bar lands between its steps."""
    import datasets

    monkeypatch.setattr("kernelbench_v3.evaluate.evaluate", _fake_evaluate)
    datasets.enable_progress_bars()  # as a user's process starts
    for _ in range(2):
        records = demo.run_demo(tmp_path / "out", device="cpu", say=print)
    lines = (tmp_path / "out" / "records.jsonl").read_text().splitlines()
    assert len(lines) == len(records) == 6
    out, err = capfd.readouterr()
    assert "Generating" not in out + err, err
    assert "records written to" in out
    assert datasets.is_progress_bar_enabled()  # the user's setting is back afterwards
