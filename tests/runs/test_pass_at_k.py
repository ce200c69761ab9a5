"""pass@k (Chen et al. 2021's unbiased estimator), fast_p@k and the per-model summary: the
estimator against brute-force counting, speed figures n/a (never 0) on CPU records."""

from __future__ import annotations

import itertools
import math

import pandas as pd
import pytest

from kernelbench_v3.runs.pass_at_k import (
    model_summaries,
    pass_at_k,
    problem_table,
    problem_table_text,
    sort_records_best_first,
    summaries_csv,
    summaries_text,
)


@pytest.mark.parametrize("n,c", [(1, 0), (1, 1), (4, 1), (5, 2), (6, 6), (7, 0), (10, 3)])
def test_the_estimator_is_the_share_of_k_subsets_holding_a_pass(n, c):
    outcomes = [True] * c + [False] * (n - c)
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(outcomes, k))
        assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def _records(rows, device="cuda") -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["model", "problem_id", "sample", "correct", "speedup"])
    frame["device"] = device
    frame["timing_meaningful"] = [(device == "cuda") if c else None for c in frame["correct"]]  # None: not timed
    if device == "cpu":
        frame["speedup"] = None
    return frame


GPU_ROWS = [
    ("m", "level1/a", 0, True, 2.5),
    ("m", "level1/a", 1, True, 1.2),
    ("m", "level1/a", 2, False, None),
    ("m", "level1/b", 0, False, None),
    ("m", "level1/b", 1, True, 0.8),
    ("m", "level1/b", 2, False, None),
]


def test_the_summary_of_a_gpu_run():
    (s,) = model_summaries(_records(GPU_ROWS))
    assert (s["samples"], s["problems"], s["samples_per_problem"], s["correct"]) == (6, 2, 3, 3)
    assert s["pass@1"] == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert s["pass@3"] == 1.0
    assert s["fast_1@1"] == pytest.approx((2 / 3 + 0) / 2)  # a: two faster than 1x; b: 0.8x is not
    assert s["fast_2@1"] == pytest.approx((1 / 3) / 2) and s["fast_2@3"] == pytest.approx(0.5)
    assert s["fast_1.5@2"] == pytest.approx((1 - 1 / 3) / 2)  # a: 1 - C(2,2)/C(3,2)
    assert s["geomean_speedup"] == pytest.approx(math.exp((math.log(2.5) + math.log(1.2) + math.log(0.8)) / 3))
    assert s["speed_measured"] is True and s["samples_per_problem_max"] == 3


def test_on_cpu_every_speed_figure_is_none_and_reads_n_a():
    cpu = _records([(m, p, i, c, None) for m, p, i, c, _ in GPU_ROWS], device="cpu")
    (s,) = model_summaries(cpu)
    assert s["pass@1"] == pytest.approx(0.5)
    speed = [k for k in s if k.startswith("fast_")] + ["geomean_speedup"]
    assert len(speed) == 10 and all(s[k] is None for k in speed)
    csv = summaries_csv([s]).splitlines()
    header, row = csv[0].split(","), csv[1].split(",")
    assert all(row[header.index(k)] == "n/a" for k in speed)
    assert "0.0" not in row and "n/a on CPU" in summaries_text([s])
    table = problem_table(cpu)
    assert list(table["best_speedup"]) == [None, None] and s["speed_measured"] is False  # data: None, never text
    assert list(table["best_sample"]) == [0, 1]  # correct samples, just no speedup on the CPU
    assert problem_table_text(table).split("\n")[1].split()[-1] == "n/a"  # the text says n/a


def test_the_problem_table_and_the_record_order_put_the_best_sample_first():
    records = _records(GPU_ROWS)
    table = problem_table(records)
    assert table.to_dict("records")[0] == {
        "model": "m",
        "gpu": None,
        "problem": "level1/a",
        "samples": 3,
        "correct": 2,
        "pass@1": pytest.approx(2 / 3),
        "best_sample": 0,
        "best_speedup": 2.5,
    }
    assert table.iloc[1]["best_sample"] == 1
    shuffled = records.iloc[[5, 2, 1, 4, 0, 3]]
    ordered = sort_records_best_first(shuffled)
    # The problem table's order (problems by id, not as the file lists them), best sample first.
    assert [(p[-1], s) for p, s in zip(ordered["problem_id"], ordered["sample"])] == [
        ("a", 0), ("a", 1), ("a", 2), ("b", 1), ("b", 0), ("b", 2)
    ]  # fmt: skip


def test_records_without_a_sample_column_are_one_sample_each():
    frame = _records(GPU_ROWS).drop(columns=["sample"])
    frame["model"] = ["x", "x", "x", "y", "y", "y"]
    x, y = model_summaries(frame)
    assert x["samples_per_problem"] == 3  # three records of one problem: three samples
    assert y["pass@1"] == pytest.approx(1 / 3)
