"""`kbv3 baselines`: a split's baselines timed once and cached under the key evaluations use."""

from __future__ import annotations

import re

from kernelbench_v3.cli.main import main
from kernelbench_v3.evaluate.supervisor.reference import isolate


def test_baselines_are_timed_once_then_reported_as_cached(tmp_path, monkeypatch, capsys):
    calls = []

    def child(role, workdir, spec, **kwargs):
        calls.append((role, spec["problem_path"], dict(spec["sizes"])))
        result = {"ok": True, "eager": {"median_ms": 2.0}, "compiled": {"median_ms": 1.5}, "precision": "fp32"}
        return isolate.ChildOutcome(result, 0, False, False, "", 1.0)

    monkeypatch.setattr(isolate, "run_child", child)
    argv = ["baselines", "--split", "h100", "--only", "level1/23_Softmax,level1/26_GELU_", "--device", "cpu"]
    assert main([*argv, "--cache", str(tmp_path)]) == 0
    first = capsys.readouterr().out.splitlines()
    assert first[-1].startswith("note: these are CPU times, no performance figure")  # issue 41
    assert [re.sub(r"in [0-9.]+ s", "in X s", line) for line in first[:-1]] == [
        "level1/23_Softmax: 1.5 ms (compile; eager 2, compiled 1.5) [timed in X s]",
        "level1/26_GELU_: 1.5 ms (compile; eager 2, compiled 1.5) [timed in X s]",
    ]
    # On the CPU an evaluation times the reference at its REDUCED_SIZES: so does the cache filler.
    assert [sizes for _, _, sizes in calls] == [{"batch_size": 16, "dim": 1024}] * 2
    assert main([*argv, "--cache", str(tmp_path)]) == 0
    assert all(line.endswith("[cached]") for line in capsys.readouterr().out.splitlines()[:-1])
    assert len(calls) == 2


def test_a_problem_outside_the_split_is_a_usage_error(capsys):
    assert main(["baselines", "--split", "h100", "--only", "graphics/nope", "--device", "cpu"]) == 2
    assert "not in the h100 split" in capsys.readouterr().err


def test_a_failed_baseline_is_reported_and_exits_1(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(isolate, "run_child", lambda *a, **k: isolate.ChildOutcome(None, 1, False, False, "boom", 1.0))
    code = main(
        ["baselines", "--split", "h100", "--only", "level1/23_Softmax", "--device", "cpu", "--cache", str(tmp_path)]
    )
    assert code == 1 and re.search(r"level1/23_Softmax: failed \(timed in [0-9.]+ s\)", capsys.readouterr().out)
