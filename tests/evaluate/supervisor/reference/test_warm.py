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


def _run_of(host_floats: int, device_floats: int = 0):
    """A stand-in run holding `host_floats` on the host and `device_floats` on a device ("meta")."""
    from types import SimpleNamespace

    case = SimpleNamespace(
        inputs=[torch.zeros(host_floats)], saved={"expected": torch.zeros(device_floats, device="meta")}
    )
    return SimpleNamespace(shapes={}, cases={"seed42": case})


def test_kept_references_fit_their_budgets_and_the_largest_goes_first(monkeypatch):
    # A service going round several problems keeps each one's reference, within byte budgets
    # (device and host) for all but the last; over them, the largest goes, not the oldest.
    monkeypatch.setattr(warm_references, "sampled_checksum", lambda run: 0.0)  # meta tensors hold no values
    warm_references.keep_references_warm(8, device_bytes=400, host_bytes=900)
    small, large, other = _run_of(10, 10), _run_of(200), _run_of(20, 20)
    assert warm_references.held_bytes(small) == (40, 40) and warm_references.held_bytes(large) == (0, 800)
    warm_references.remember("small", small)
    warm_references.remember("large", large)  # the last one: kept whatever its size
    warm_references.remember("other", other)  # small + large = 840 host bytes before it: fits
    assert [warm_references.recall(k) for k in ("small", "large", "other")] == [small, large, other]
    warm_references.remember("more", _run_of(60))  # before it 40 + 800 + 80 host bytes: over 900
    assert warm_references.recall("large") is None  # the largest went; the small ones stayed
    assert warm_references.recall("small") is small and warm_references.recall("other") is other
    warm_references.remember("huge", _run_of(10, 1000))  # alone over the device budget, and kept
    assert warm_references.recall("huge") is not None
    warm_references.remember("next", _run_of(1))  # now it is not the last: it goes
    assert warm_references.recall("huge") is None and warm_references.recall("small") is small
