"""The shared vocabulary and the one EvalOptions type that `eval`, `eval-batch` and batches share."""

import dataclasses

import pytest

from kernelbench_v3.batch.queue import BatchSettings
from kernelbench_v3.catalog.problem import SPLIT_FOLDERS
from kernelbench_v3.cli.main import build_parser
from kernelbench_v3.cli.options import eval_options_from
from kernelbench_v3.evaluate import EvalOptions, EvalRequest, Record
from kernelbench_v3.vocab import (
    PUBLISHED_RUNS_COLUMNS,
    RECORD_RUNS_COLUMNS,
    SPLITS,
    runs_gpu_name,
    split_of,
)

# EvalRequest fields that say what is judged rather than how.
WHAT = {"problem_id", "solution_path", "gpu", "device", "sizes", "model", "max_log_bytes", "extra"}


def test_eval_options_are_exactly_the_requests_judging_fields_with_its_defaults():
    request_fields = {f.name: f for f in dataclasses.fields(EvalRequest)}
    option_fields = {f.name: f for f in dataclasses.fields(EvalOptions)}
    assert set(option_fields) == set(request_fields) - WHAT
    for name, field in option_fields.items():
        assert field.default == request_fields[name].default, name


def test_options_build_the_request_they_describe(tmp_path):
    options = EvalOptions(tolerance="strict", seeds=(1, 2), other_shape=False, timeout_s=9.0)
    request = options.request("level1/23_Softmax", tmp_path / "s.py", gpu="h100", device="cpu", sizes={"N": 8})
    assert (request.tolerance, request.seeds, request.other_shape, request.timeout_s) == ("strict", (1, 2), False, 9.0)
    assert request.size_overrides == {"N": 8}
    assert options.changed() == {"tolerance": "strict", "seeds": (1, 2), "other_shape": False, "timeout_s": 9.0}


@pytest.mark.parametrize(
    "field, value",
    [("tolerance", "loose"), ("kernel_rule", "relaxed"), ("kernel_rule", "v2")],
)
def test_options_refuse_values_outside_the_vocabulary(field, value):
    with pytest.raises(ValueError, match=f"EvalOptions.{field}"):
        EvalOptions(**{field: value})


FLAGS = [
    "--tolerance",
    "strict",
    "--kernel-rule",
    "v3",
    "--relax-kernel-check",
    "--no-source-scan",
    "--seeds",
    "7,8",
    "--no-other-shape",
    "--no-timing",
    "--timing-seconds",
    "2",
    "--no-baseline",
    "--retry-failed-baseline",
]


def test_eval_and_eval_batch_read_the_same_flags_into_the_same_options(tmp_path):
    parser = build_parser()
    one = parser.parse_args(["eval", "--problem", "level1/23_Softmax", "--solution", "s.py", *FLAGS])
    many = parser.parse_args(["eval-batch", str(tmp_path), "--split", "h100", "--out", "o.parquet", *FLAGS])
    a, b = eval_options_from(one), eval_options_from(many)
    assert dataclasses.replace(a, timeout_s=0.0) == dataclasses.replace(b, timeout_s=0.0)
    assert a == EvalOptions(
        tolerance="strict",
        require_custom_kernel=False,
        kernel_rule="v3",
        scan_source=False,
        seeds=(7, 8),
        time_solution=False,
        baseline=False,
        other_shape=False,
        timing_seconds=2.0,
        retry_failed_baseline=True,
    )
    # No --timeout: each step's limit is derived from the problem, in eval and in eval-batch.
    assert (a.timeout_s, b.timeout_s) == (EvalRequest("p", "s").timeout_s, None) == (None, None)


def test_batch_settings_journal_what_they_change():
    settings = BatchSettings(split="h100", device="cpu", options=EvalOptions(timeout_s=5.0, baseline=False))
    assert settings.timeout_s == 5.0
    assert settings.to_dict() == {
        "split": "h100",
        "device": "cpu",
        "sizes": "default",
        "timeout_s": 5.0,
        "problems_root": None,
        "evaluator_options": {"baseline": False},
    }


def test_split_and_runs_gpu_names_convert_one_way_each():
    assert set(SPLITS) == set(SPLIT_FOLDERS)
    assert [runs_gpu_name(s) for s in SPLITS] == ["RTX3090", "H100", "B200"]
    assert runs_gpu_name("RTX 3090") == "RTX3090" and runs_gpu_name("h200") == "H200"
    assert [split_of(runs_gpu_name(s)) for s in SPLITS] == list(SPLITS)
    assert split_of("H200") is None and split_of(" ") is None
    with pytest.raises(ValueError, match="empty GPU name"):
        runs_gpu_name("-")


def test_a_record_fills_the_published_columns_it_claims():
    assert set(RECORD_RUNS_COLUMNS) <= set(PUBLISHED_RUNS_COLUMNS)
    assert [c for c in PUBLISHED_RUNS_COLUMNS if c in RECORD_RUNS_COLUMNS] == list(RECORD_RUNS_COLUMNS)
    assert list(Record().runs_row()) == list(RECORD_RUNS_COLUMNS)
