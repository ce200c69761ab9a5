"""The gate's host side and the baseline child's in-process callers, on a
machine without CUDA: what can be checked without a GPU (the GPU figures are in benchmarks/)."""

from __future__ import annotations

import random

import pytest
import torch

from kernelbench_v3.evaluate.protocol import gate
from kernelbench_v3.evaluate.protocol.doorbell import NBYTES, WORDS, Doorbell
from kernelbench_v3.evaluate.supervisor.timing.local import HostLocal
from kernelbench_v3.evaluate.supervisor.timing.measure import Feed, measure
from kernelbench_v3.evaluate.supervisor.timing.stats import CallPlan


def test_the_gate_words_sit_after_the_doorbell_words_a_cache_line_apart():
    assert WORDS * 8 <= gate.GATE_DONE_OFFSET and gate.GATE_GO_OFFSET - gate.GATE_DONE_OFFSET >= 16
    assert gate.GATE_GO_OFFSET + 4 <= gate.GATE_BYTES == NBYTES
    memory = torch.zeros(NBYTES, dtype=torch.uint8)
    bell = Doorbell(memory)
    words = bell.gate_words()
    words.go, words.done = 7, 5
    raw = memory.view(torch.int32)
    assert int(raw[gate.GATE_GO_OFFSET // 4]) == 7 and int(raw[gate.GATE_DONE_OFFSET // 4]) == 5
    bell.reset()  # a new session clears the gate with the words
    assert words.go == words.done == 0


def test_a_private_block_is_a_page_the_gate_can_use():
    page, view, address = gate.private_block()
    words = gate.GateWords(view)
    words.done = 3
    assert address > 0 and address % page_size() == 0 and words.done == 3


def page_size() -> int:
    import mmap

    return mmap.PAGESIZE


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without a CUDA driver")
def test_without_a_cuda_driver_the_gate_is_unavailable_not_a_crash():
    try:
        gate.Driver()
    except gate.GateUnavailable as exc:
        assert "driver" in str(exc) or "CUDA" in str(exc)
    else:  # a driver library without a GPU: registering must then fail as unavailable
        pytest.skip("a CUDA driver library is installed")


def test_the_baseline_childs_host_callers_go_through_the_one_measure():
    calls = []

    def call(s):
        calls.append(s)

    ticks = iter(range(10**6))
    plan = CallPlan(min_calls=5, max_calls=5, target_rel=0.0, cap_s=1e9)
    feed = Feed(2, lambda: [torch.zeros(1)], lambda s, inputs: None, lambda inputs: None)

    from kernelbench_v3.evaluate.supervisor.timing.device_work import DeviceWork

    result = measure(
        HostLocal(call, clock=lambda: float(next(ticks))),
        HostLocal(lambda s: None),
        feed,
        DeviceWork("cpu"),
        plan,
        random.Random(0),
        subtract_echo=False,
    )
    assert len(result.nets) == 5 and len(calls) == 8  # three warm calls, then five scored
    assert result.nets == [1.0] * 5  # one tick of its clock per call, the echo not subtracted
