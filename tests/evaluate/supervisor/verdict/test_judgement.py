"""What a record says about checks that could not be judged, and errors found before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelbench_v3.evaluate import EvalRequest, evaluate


def test_a_wrong_shape_leaves_every_value_check_not_run():
    from kernelbench_v3.evaluate.record import FAIL, NOT_RUN, PASS
    from kernelbench_v3.evaluate.supervisor.verdict.judgement import _mark_dependent_not_run

    out = {"output_shape": (FAIL, "shape"), "correctness": (PASS, ""), "finite": (PASS, ""), "stress": (PASS, "")}
    _mark_dependent_not_run(out)
    assert out["output_shape"][0] == FAIL
    assert {out[n][0] for n in ("correctness", "finite", "stress")} == {NOT_RUN}
    wrong_values = {"correctness": (FAIL, "values"), "stress": (FAIL, ""), "finite": (PASS, "")}
    _mark_dependent_not_run(wrong_values)
    assert wrong_values["correctness"][0] == FAIL and wrong_values["finite"][0] == PASS
    assert wrong_values["stress"][0] == NOT_RUN


def test_a_solution_that_does_not_parse_fails_before_the_reference_runs_naming_the_users_file(tmp_path):
    from kernelbench_v3.evaluate.supervisor.run import evaluation

    broken = tmp_path / "my_kernel.py"
    broken.write_text("import torch\n\nclass ModelNew(torch.nn.Module:\n    pass\n")
    calls = []
    real = evaluation.compute

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(evaluation, "compute", counting)
        record = evaluate(EvalRequest("level1/23_Softmax", broken, device="cpu", baseline=False))
    assert record.status == "failed" and record.failed_check == "import", record.error
    assert str(Path(broken)) in record.error and "SyntaxError" in record.error and "line 3" in record.error
    assert calls == []  # no reference was computed
