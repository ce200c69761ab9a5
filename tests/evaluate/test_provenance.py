"""Provenance by byte range (issue 39, item 1) and what a launch may leave behind (item 2): the
timing region is one storage, so marks follow the bytes a tensor spans; a launch's end leaves
exactly what its programs stored."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernelbench_v3.evaluate.evidence import ProgramLog, Sources, collect
from kernelbench_v3.evaluate.provenance import FOREIGN, KNOWN, ByteMap, Provenance, runs
from kernelbench_v3.evaluate.timed_calls import TimedCalls
from tests.evaluate.test_evidence import _counter_installed

N = 1024  # floats per tensor: 4 KiB, above SMALL_BYTES


def test_the_byte_map_splits_and_queries_ranges():
    m = ByteMap()
    m.set(0, 100, KNOWN)
    m.set(40, 60, FOREIGN)
    assert m.query(0, 40) == (False, 0)
    assert m.query(30, 50) == (True, 0)
    assert m.query(90, 130) == (False, 30)
    m.set(0, 100, KNOWN)
    assert m.query(0, 100) == (False, 0) and len(m.lo) == 1


def test_runs_are_exact_even_for_strided_and_repeated_addresses():
    assert runs(np.array([100, 104, 108], dtype=np.uint64), 4) == [(100, 112)]
    assert runs(np.array([100, 108, 100], dtype=np.uint64), 4) == [(100, 104), (108, 112)]


def _region():
    """Two input sets and two output slots in one storage, as the CPU timing region lays them."""
    region = torch.zeros(4 * N * 4, dtype=torch.uint8)

    def at(i):
        return region[i * N * 4 : (i + 1) * N * 4].view(torch.float32)

    sets, slots = [[at(0)], [at(2)]], [at(1), at(3)]
    for s in sets:
        s[0].copy_(torch.randn(N))
    return region, sets, slots


def test_a_timed_input_is_known_and_the_rest_of_its_region_is_not():
    _, sets, slots = _region()
    prov = Provenance()
    prov.seed(Sources(sets[0]))
    assert not prov.foreign_values(sets[0][0])
    assert prov.foreign_values(sets[1][0]) and prov.foreign_values(slots[0])  # same storage, other bytes


def test_numpy_writing_a_timed_input_in_place_makes_it_foreign_and_mutated():
    _, sets, _ = _region()
    prov = Provenance()
    prov.seed(Sources(sets[0]))
    sets[0][0].numpy()[:] = 1.0  # behind the dispatcher's back
    prov.enter()
    assert prov.foreign_values(sets[0][0]) and prov.mutated_inputs() == [0]


def _model(kind):
    def forward(x):
        if kind == "input":
            return x
        if kind == "view":
            return x[: N // 2]
        return x * 2

    return forward


@pytest.mark.parametrize("kind", ["input", "view"])
def test_a_timed_call_that_returns_its_input_or_a_view_of_it_is_aliasing(kind):
    _, sets, slots = _region()
    if kind == "view":
        slots = [s[: N // 2] for s in slots]
    log = ProgramLog()
    _, ev = collect(lambda: TimedCalls(_model(kind), sets, slots).run(0), "cpu", log, sources=Sources(sets[0]))
    assert ev["output_aliases"] == ["input 0"] and ev["aliased_calls"] == 1


def test_a_timed_call_with_an_output_of_its_own_is_not_aliasing_and_the_count_lasts():
    _, sets, slots = _region()
    log = ProgramLog()
    log.aliased_calls = 2  # earlier calls of this process returned an input
    _, ev = collect(lambda: TimedCalls(_model("new"), sets, slots).run(1), "cpu", log, sources=Sources(sets[1]))
    assert ev["output_aliases"] == [] and ev["aliased_calls"] == 2 and ev["mutated_inputs"] == []


def _store_kernel():
    from triton.runtime.interpreter import InterpretedFunction

    from kernelbench_v3.catalog.materialize import import_file
    from tests.paths import SOLUTIONS

    return InterpretedFunction(import_file(SOLUTIONS / "triton_add_one.py").add_one)


def test_what_a_launch_did_not_store_is_put_back_at_its_end():
    pytest.importorskip("triton")
    kernel = _store_kernel()
    x = torch.randn(N)
    log = ProgramLog()

    def forward():
        y = torch.zeros(N)

        # Code the launch runs outside the programs (the grid function) writes y behind their back.
        def grid(meta):
            y.numpy()[:] = 7.0
            return (N // 2 // 256,)  # the programs store only the first half

        kernel[grid](x, y, N // 2, BLOCK=256)
        return y

    with _counter_installed(log):
        out, ev = collect(forward, "cpu", log, sources=Sources([x]))
    assert torch.equal(out[: N // 2], x[: N // 2] + 1)  # what the programs stored
    assert torch.equal(out[N // 2 :], torch.zeros(N // 2))  # the grid function's write was put back
    assert ev["overwritten_launches"] == ["add_one"]


def test_an_honest_launch_is_neither_foreign_nor_overwritten():
    pytest.importorskip("triton")
    kernel = _store_kernel()
    x = torch.randn(N)
    log = ProgramLog()

    def forward():
        y = torch.empty_like(x)
        kernel[(N // 256,)](x, y, N, BLOCK=256)
        return y

    with _counter_installed(log):
        collect(forward, "cpu", log, sources=Sources([x]))  # the first launch rewrites the body
        _, ev = collect(forward, "cpu", log, sources=Sources([x]))
    assert ev["output_foreign"] is False and ev["overwritten_launches"] == []


def test_a_launchs_whole_path_is_its_programs_time_the_rewrite_included(monkeypatch):
    """The interpreter's own cost before the grid loop (rewriting the body, converting the
    arguments) is the launch's: a fake clock that the rewrite advances by 10 s shows it."""
    pytest.importorskip("triton")
    from triton.runtime.interpreter import InterpretedFunction

    kernel = _store_kernel()
    clock = {"now": 0.0}
    rewrite = InterpretedFunction.rewrite

    def slow_rewrite(self):
        clock["now"] += 10.0
        return rewrite(self)

    monkeypatch.setattr(InterpretedFunction, "rewrite", slow_rewrite)
    log = ProgramLog(clock=lambda: clock["now"])
    x = torch.randn(N)
    with _counter_installed(log):
        _, ev = collect(lambda: kernel[(N // 256,)](x, torch.empty_like(x), N, BLOCK=256), "cpu", log)
    assert ev["program_seconds"] == 10.0


def test_the_evaluators_bookkeeping_is_not_work_outside_the_programs():
    from kernelbench_v3.evaluate.supervisor.verdict.kernel_rule import judge_kernel_evidence

    evidence = {
        "ops": {"empty_like": [1, 0.001, 0]},
        "programs": [["softmax_kernel", 256]],
        "forward_seconds": 0.60,
        "program_seconds": 0.50,
        "evaluator_seconds": 0.095,  # copies and compares of large watched tensors
        "program_bytes": 1e6,
    }
    checks, facts = judge_kernel_evidence(
        evidence, device="cpu", rule="strict", reference_ops={"_softmax": [1, 0.03, 1e6]}, reference_kernels=[]
    )
    assert checks["main_work"][0] == "pass", checks["main_work"]
    assert facts["outside_programs_s"] < 0.01


def test_a_strided_view_written_by_an_op_makes_only_its_own_bytes_known():
    from kernelbench_v3.evaluate.evidence import OpRecorder

    x = torch.randn(64, 64)
    prov = Provenance()
    prov.seed(Sources([x]))
    with OpRecorder(prov):
        y = torch.empty_like(x)  # foreign until something stores into it
        y.numpy()[:] = torch.softmax(x, 1).numpy()  # the answer, written behind the dispatcher's back
        y[:, :1].copy_(x[:, :1])  # a column view spans nearly all of y
    assert not prov.foreign_values(y[:, :1]) and prov.foreign_values(y)


def test_a_strided_view_of_numpy_memory_is_foreign_however_small_each_run():
    prov = Provenance()
    prov.seed(Sources([torch.randn(8)]))
    column = torch.from_numpy(np.random.rand(512, 4).astype(np.float32))[:, :1]  # 512 runs of 4 bytes
    assert prov.foreign_values(column)


def test_a_launch_from_another_thread_is_none_of_the_forwards_work():
    pytest.importorskip("triton")
    import threading

    kernel = _store_kernel()
    x = torch.randn(N)
    log = ProgramLog()

    def forward():
        y = torch.empty_like(x)
        worker = threading.Thread(target=lambda: kernel[(N // 256,)](x, y, N, BLOCK=256))
        worker.start()
        worker.join()
        return y

    with _counter_installed(log):
        out, ev = collect(forward, "cpu", log, sources=Sources([x]))
    assert torch.equal(out, x + 1)  # it ran, unobserved
    assert ev["programs"] == [] and ev["output_foreign"] is True


def test_a_call_that_changed_its_input_is_counted_for_the_process():
    _, sets, slots = _region()
    log = ProgramLog()

    def in_place(x):
        x.mul_(2)
        return x * 1

    _, ev = collect(lambda: TimedCalls(in_place, sets, slots).run(0), "cpu", log, sources=Sources(sets[0]))
    assert ev["mutated_inputs"] == [0] and ev["mutated_calls"] == 1
    _, later = collect(lambda: TimedCalls(_model("new"), sets, slots).run(1), "cpu", log, sources=Sources(sets[1]))
    assert later["mutated_inputs"] == [] and later["mutated_calls"] == 1  # a later sample still says so


def test_the_verdict_fails_a_sampled_timed_call_that_aliased_or_changed_an_input():
    from kernelbench_v3.evaluate.supervisor.verdict.judgement import SolutionFacts, _judge_sampled_calls

    facts = SolutionFacts(
        evidence_samples=[
            ("case seed42", {"mutated_inputs": [], "output_aliases": [], "aliased_calls": 0, "mutated_calls": 0}),
            ("timed call 3", {"mutated_inputs": [], "output_aliases": [], "aliased_calls": 2, "mutated_calls": 1}),
        ]
    )
    out = {}
    _judge_sampled_calls(out, facts)
    assert out["output_aliasing"][0] == "fail" and "timed call 3" in out["output_aliasing"][1]
    assert out["input_mutation"][0] == "fail" and "1 observed call(s)" in out["input_mutation"][1]
