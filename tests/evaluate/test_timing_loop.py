"""`cuda_timing.time_cuda` run on the CPU against a stand-in for torch.cuda, to pin down what happens
between two timed calls. The order matters on a GPU: data written just before the L2 flush is not
fully cleaned by it, and that put separate processes up to 9% apart for 12-15 us kernels on an
H200 (docs/timing.md). So the reported (fresh-input) calls must follow only
the flush and the spin kernel, with the fresh-input blend and the output copy elsewhere."""

from __future__ import annotations

import time

import pytest
import torch

from kernelbench_v3.evaluate import cuda_timing
from kernelbench_v3.evaluate import fresh as F


class _Trace:
    def __init__(self):
        self.ops: list[str] = []


@pytest.fixture
def fake_cuda(monkeypatch):
    """torch.cuda's Event, _sleep and synchronize, flush buffers on the CPU, and a trace of the
    flush reads, the spin kernel, the events, the fresh-input blends and the output copies."""
    trace = _Trace()

    class Event:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            self.t = time.perf_counter()
            trace.ops.append("event")

        def elapsed_time(self, other):
            return (other.t - self.t) * 1e3

    real_zeros, real_sum = torch.zeros, torch.sum

    def zeros(*args, device=None, **kwargs):
        return real_zeros(*args, **kwargs)

    def traced_sum(*args, **kwargs):
        if "out" in kwargs:  # the flush: the only reduction time_cuda writes into a held scalar
            trace.ops.append("flush")
        return real_sum(*args, **kwargs)

    real_next, real_clone = F.FreshInputs.next, cuda_timing._clone_output

    def traced_next(self):
        trace.ops.append("blend")
        return real_next(self)

    def traced_clone(out):
        trace.ops.append("copy_output")
        return real_clone(out)

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: trace.ops.append("spin"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(torch, "zeros", zeros)
    monkeypatch.setattr(torch, "sum", traced_sum)
    monkeypatch.setattr(cuda_timing, "l2_flush_bytes", lambda device=None: 4096)
    monkeypatch.setattr(F.FreshInputs, "next", traced_next)
    monkeypatch.setattr(cuda_timing, "_clone_output", traced_clone)
    return trace


PLAN = cuda_timing.TimingPlan(
    warmup=1,
    warmup_seconds=0.0,
    min_reps=10,
    batch=5,
    max_reps=20,
    max_seconds=2.0,
    min_seconds=0.0,
    clock_settle_seconds=0.0,
    wall_reps=0,
)


def _calls(trace, tag):
    def call(args):
        trace.ops.append(f"call:{tag(args)}")
        return args[0] * 2.0

    return call


def _segments(ops: list[str]) -> list[tuple[str, list[str]]]:
    """(the call, the ops since the previous call) for every call in the timed loop."""
    out, since = [], []
    for op in ops:
        if op.startswith("call:"):
            out.append((op[5:], since))
            since = []
        else:
            since.append(op)
    return out


def test_a_reported_call_follows_only_the_flush_and_the_spin_kernel(fake_cuda):
    sets = [[torch.full((4,), float(k))] for k in range(2)]
    fresh = F.FreshInputs(sets, partner=[torch.ones(4)], final=[torch.zeros(4)], buffers=2)
    fresh_ids = {id(b[0]) for b in fresh.buffers} | {id(fresh.final[0])}
    call = _calls(fake_cuda, lambda args: "fresh" if id(args[0]) in fresh_ids else "rotating")

    stats, last = cuda_timing.time_cuda(call, sets, PLAN, fresh=fresh)

    timed = _segments(fake_cuda.ops)
    first_flush = next(i for i, (_, before) in enumerate(timed) if "flush" in before)
    timed = timed[first_flush:]  # warm-up and the enqueue-time probe are not timed
    fresh_calls = [before for who, before in timed if who == "fresh"]
    assert len(fresh_calls) == stats.reps >= PLAN.min_reps
    # The last one, on the checked inputs, comes after the loop and so after the last output copy:
    # one sample of hundreds, kept for its value check; it is still flushed twice.
    assert fresh_calls[-1][-4:] == ["flush", "flush", "spin", "event"]
    for before in fresh_calls[:-1]:
        # Ends with: flush, flush, spin, start event; nothing written since the previous call's end.
        assert before[-4:] == ["flush", "flush", "spin", "event"], before
        assert "blend" not in before and "copy_output" not in before, before
    rotating = [before for who, before in timed if who == "rotating"]
    assert rotating and all(before.count("blend") == 1 for before in rotating[:-1])
    assert stats.details["l2_flush_passes"] == 2 and stats.details["l2_flush"] == "read"
    assert fresh.final_output is not None and all(out is not None for out in last)


def test_without_fresh_inputs_each_timed_call_still_follows_a_double_flush(fake_cuda):
    sets = [[torch.full((4,), float(k))] for k in range(3)]
    stats, last = cuda_timing.time_cuda(_calls(fake_cuda, lambda args: "set"), sets, PLAN)
    timed = [before for _, before in _segments(fake_cuda.ops) if "flush" in before]
    assert len(timed) == stats.reps and "blend" not in fake_cuda.ops
    assert all(before[-4:] == ["flush", "flush", "spin", "event"] for before in timed)
    assert [float(out[0]) for out in last] == [0.0, 2.0, 4.0]


def test_the_flush_pass_count_is_followed(fake_cuda):
    sets = [[torch.ones(4)]]
    plan = cuda_timing.TimingPlan(**{**PLAN.__dict__, "l2_flush_passes": 3})
    stats, _ = cuda_timing.time_cuda(_calls(fake_cuda, lambda args: "set"), sets, plan)
    timed = [before for _, before in _segments(fake_cuda.ops) if "flush" in before]
    assert all(before.count("flush") == 3 for before in timed) and stats.details["l2_flush_passes"] == 3
