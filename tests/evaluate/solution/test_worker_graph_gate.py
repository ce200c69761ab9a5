"""The solution worker under a graph gate (`Worker._enqueue_graph_gated`) on a machine without
CUDA: each set's gated graph is built once, and a graph the driver refuses is held by the spin
kernel instead, so an honest call is never lost to the way it is held."""

from __future__ import annotations

from types import SimpleNamespace

from kernelbench_v3.evaluate.protocol.gate import GateUnavailable
from kernelbench_v3.evaluate.solution.worker import Worker


class _Driver:
    def __init__(self, refuse: set[int]):
        self.refuse, self.built = refuse, []

    def gated_graph(self, child, go, target, kind, done):
        self.built.append((child, kind))
        if child in self.refuse:
            raise GateUnavailable("cuGraphClone: not supported")
        return 0x400 + child


class _Gate:
    go_device, target_device, done_device = 0x10, 0x20, 0x30

    def __init__(self):
        self.queued = []

    def enqueue(self, driver, stream, seq, call, spin):
        self.queued.append(("spin kernel", seq, call(), spin))

    def enqueue_gated_graph(self, driver, stream, seq, graph, done_in_graph):
        self.queued.append(("gated graph", seq, graph, done_in_graph))


def _worker(refuse: set[int]) -> Worker:
    worker = Worker.__new__(Worker)  # no link, arena or CUDA: only the graph gate's state
    graphs = [SimpleNamespace(raw_cuda_graph=lambda s=s: s, replay=lambda s=s: f"replay {s}") for s in range(2)]
    worker.calls, worker.gate, worker.driver, worker.stream = (
        SimpleNamespace(graphs=graphs),
        _Gate(),
        _Driver(refuse),
        None,
    )
    worker.gated_graphs = {}
    return worker


def test_each_sets_gated_graph_is_built_once_and_launched_for_every_call():
    worker = _worker(refuse=set())
    for seq, s in ((1, 0), (2, 1), (3, 0)):
        worker._enqueue_graph_gated(seq, s, "pdl-go")
    assert worker.driver.built == [(0, "pdl-go"), (1, "pdl-go")]
    assert worker.gate.queued == [
        ("gated graph", 1, 0x400, False),  # pdl-go: the stream writes DONE
        ("gated graph", 2, 0x401, False),
        ("gated graph", 3, 0x400, False),
    ]
    worker._enqueue_graph_gated(4, 1, "pdl")
    assert worker.gate.queued[-1] == ("gated graph", 4, 0x401, True)


def test_a_graph_the_driver_refuses_is_held_by_the_spin_kernel_and_not_asked_for_again():
    worker = _worker(refuse={1})
    for seq, s in ((1, 1), (2, 0), (3, 1)):
        worker._enqueue_graph_gated(seq, s, "flat")
    assert worker.driver.built == [(1, "flat"), (0, "flat")]
    assert worker.gate.queued == [
        ("spin kernel", 1, "replay 1", True),
        ("gated graph", 2, 0x400, True),
        ("spin kernel", 3, "replay 1", True),
    ]
