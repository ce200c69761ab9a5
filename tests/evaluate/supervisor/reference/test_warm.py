"""evaluate.supervisor.reference.warm: a batch worker's supervisor computes a problem's reference once."""

from __future__ import annotations

import pytest
import torch

from kernelbench_v3.evaluate.supervisor.reference import reference_run as reference
from kernelbench_v3.evaluate.supervisor.reference import warm as warm_references
from tests.evaluate.supervisor.reference.spy import Spy
from tests.paths import REPO


@pytest.fixture(autouse=True)
def _clean():
    warm_references.keep_references_warm(0)
    warm_references.forget_all()
    yield
    warm_references.keep_references_warm(0)
    warm_references.forget_all()


def _request(**sizes):
    from kernelbench_v3.evaluate import EvalRequest

    return EvalRequest(
        "level1/23_Softmax",
        REPO / "examples" / "solutions" / "level1" / "23_Softmax.py",
        device="cpu",
        sizes=sizes or {"batch_size": 4, "dim": 96},
        baseline=False,
        time_solution=False,
        seeds=(42, 123),
    )


@pytest.mark.slow
def test_a_kept_reference_is_computed_once_and_judges_alike(tmp_path, monkeypatch):
    from kernelbench_v3.evaluate import evaluate

    monkeypatch.setenv("KBV3_NO_REFERENCE_CACHE", "1")  # only the memory is in play
    spy = Spy(reference.compute)
    from kernelbench_v3.evaluate.supervisor.run import evaluation

    monkeypatch.setattr(evaluation, "compute", spy)
    off = evaluate(_request(), cache_dir=tmp_path)
    again = evaluate(_request(), cache_dir=tmp_path)
    assert spy.calls == 2 and off.reference_cached is None  # not kept outside a batch worker

    warm_references.keep_references_warm()
    first = evaluate(_request(), cache_dir=tmp_path)
    second = evaluate(_request(), cache_dir=tmp_path)
    assert spy.calls == 3 and (first.reference_cached, second.reference_cached) == (None, True)
    for record in (again, first, second):
        assert record.correct and record.checks == off.checks, record.error
        assert (record.rel_error, record.max_abs_error) == (off.rel_error, off.max_abs_error)

    other = evaluate(_request(batch_size=4, dim=64), cache_dir=tmp_path)  # other sizes: another key
    assert spy.calls == 4 and other.reference_cached is None and other.correct


def _tiny_run():
    from kernelbench_v3.catalog.problem import get_problem
    from kernelbench_v3.evaluate.cases import plan_cases

    problem = get_problem("level1/23_Softmax")
    source = problem.path.read_text(encoding="utf-8")
    plan = plan_cases((42,), other_shape=False)
    return reference.compute(problem, source, {"batch_size": 2, "dim": 32}, "cpu", plan)


def test_a_kept_reference_that_changed_is_dropped():
    warm_references.keep_references_warm()
    run = _tiny_run()
    warm_references.remember("k", run)
    assert warm_references.recall("k") is run
    case = next(iter(run.cases.values()))
    case.saved["expected"].mul_(2)  # what no evaluation may do
    assert warm_references.recall("k") is None
    assert warm_references.recall("k") is None  # dropped, so recomputed next time


def test_only_the_last_references_are_kept():
    warm_references.keep_references_warm(1)
    run = _tiny_run()
    warm_references.remember("a", run)
    warm_references.remember("b", run)
    assert warm_references.recall("a") is None and warm_references.recall("b") is run
    warm_references.keep_references_warm(0)
    assert warm_references.recall("b") is None


def test_the_checksum_reads_every_kind_of_tensor():
    run = _tiny_run()
    case = next(iter(run.cases.values()))
    case.saved["odd"] = torch.zeros(8, dtype=torch.uint8)
    before = warm_references.sampled_checksum(run)
    case.saved["odd"][0] = 1
    assert warm_references.sampled_checksum(run) != before
