"""The graph gates (`protocol.gate_graph`) on a machine without CUDA: the graph each builds over
a recorded fake of the driver's cuGraph* calls, and the kernels' PTX."""

from __future__ import annotations

import ctypes

import pytest

from kernelbench_v3.evaluate.protocol import gate, gate_graph, gate_kernels
from kernelbench_v3.evaluate.protocol.gate_graph import (
    CU_GRAPH_DEPENDENCY_TYPE_DEFAULT as DEFAULT,
)
from kernelbench_v3.evaluate.protocol.gate_graph import (
    CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as PROGRAMMATIC,
)

KERNEL, MEMSET = 0, 2  # CUgraphNodeType


class _FakeGraphs:
    """A captured graph of typed nodes and edges, and the cuGraph* calls `build_flat` makes on
    its clone, recorded."""

    def __init__(self, nodes: dict[int, int], edges: list[tuple[int, int]]):
        self.types, self.edges = dict(nodes), list(edges)
        self.added: list[tuple] = []
        self.next_id = 0x900

    def fn(self, name: str, argtypes):
        return getattr(self, name)

    def _list(self, found, out, count):
        count._obj.value = len(found)
        if out is not None:
            for i, n in enumerate(found):
                out[i] = n
        return 0

    def cuGraphClone(self, graph, original):
        self.added.append(("clone", original.value))
        graph._obj.value = 0x100
        return 0

    def cuGraphGetRootNodes(self, graph, out, count):
        return self._list([n for n in self.types if all(b != n for _, b in self.edges)], out, count)

    def cuGraphGetNodes(self, graph, out, count):
        return self._list(list(self.types), out, count)

    def cuGraphNodeGetDependentNodes_v2(self, node, out, data, count):
        assert out is None and data is None  # only counted
        return self._list([b for a, b in self.edges if a == node.value], out, count)

    def cuGraphNodeGetType(self, node, kind):
        kind._obj.value = self.types[node.value]
        return 0

    def cuGraphAddDependencies_v2(self, graph, before, after, data, n):
        d = data._obj
        self.added.append(("edge", before[0], after[0], d.type, d.from_port))
        return 0

    def cuGraphAddKernelNode(self, node, graph, deps, count, params):
        self.next_id += 1
        node._obj.value = self.next_id
        p = params._obj
        pointers = ctypes.cast(p.kernel_params, ctypes.POINTER(ctypes.c_void_p))
        values = [pointers[i] for i in range(3 if p.func == 1 else 2)]  # the spin's three, DONE's two
        args = [ctypes.cast(v, ctypes.POINTER(ctypes.c_uint64)).contents.value for v in values]
        self.added.append(("kernel", p.func, count, args))
        return 0

    def cuGraphInstantiateWithFlags(self, exe, graph, flags):
        self.added.append(("instantiate", graph.value))
        exe._obj.value = 0x400
        return 0

    def cuGraphDestroy(self, graph):
        self.added.append(("destroy", graph.value))
        return 0


def _driver(fake: _FakeGraphs, names: list[bytes]) -> gate.Driver:
    driver = gate.Driver.__new__(gate.Driver)  # no libcuda here: the calls are the fake's

    def kernel(ptx, name):
        names.append(name)
        return ctypes.c_void_p(1 if b"spin" in name else 2)

    driver._kernel, driver._graph_fn = kernel, fake.fn
    return driver


GO, DONE, TARGET, LIMIT = 0x7F40, 0x7F30, 0x7F20, gate.SPIN_LIMIT_NS


def test_pdl_puts_the_calls_nodes_between_a_spin_node_and_a_done_node_by_programmatic_edges():
    # a memset root, then two kernels side by side, one of them also a root; both kernels leaves
    fake = _FakeGraphs({0x10: MEMSET, 0x11: KERNEL, 0x12: KERNEL}, [(0x10, 0x11)])
    names: list[bytes] = []
    exe = _driver(fake, names).gated_graph(0xC0FFEE, GO, TARGET, kind="pdl", done=DONE)
    assert exe == 0x400 and names == [b"kbv3_gate_spin_at_pdl", b"kbv3_done_at_pdl"]
    spin, closer = 0x901, 0x902
    port = gate_graph.CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC
    assert fake.added == [
        ("clone", 0xC0FFEE),  # the caller's captured graph is left as it was
        ("kernel", 1, 0, [GO, TARGET, LIMIT]),
        ("edge", spin, 0x10, DEFAULT, 0),  # a memset: programmatic edges join kernels only
        ("edge", spin, 0x12, PROGRAMMATIC, port),
        ("kernel", 2, 0, [DONE, TARGET]),
        ("edge", 0x11, closer, PROGRAMMATIC, port),
        ("edge", 0x12, closer, PROGRAMMATIC, port),
        ("instantiate", 0x100),
        ("destroy", 0x100),  # the clone, once instantiated
    ]


def test_flat_has_the_same_shape_by_plain_edges_and_pre_hopper_kernels():
    fake = _FakeGraphs({0x10: MEMSET, 0x11: KERNEL, 0x12: KERNEL}, [(0x10, 0x11)])
    names: list[bytes] = []
    _driver(fake, names).gated_graph(0xC0FFEE, GO, TARGET, kind="flat", done=DONE)
    assert names == [b"kbv3_gate_spin_at", b"kbv3_done_at"]
    edges = [a for a in fake.added if a[0] == "edge"]
    assert {(e[3], e[4]) for e in edges} == {(DEFAULT, 0)} and len(edges) == 4


def test_pdl_go_starts_the_calls_kernels_by_programmatic_edges_and_leaves_done_to_the_stream():
    fake = _FakeGraphs({0x10: MEMSET, 0x11: KERNEL, 0x12: KERNEL}, [(0x10, 0x11)])
    names: list[bytes] = []
    _driver(fake, names).gated_graph(0xC0FFEE, GO, TARGET, kind="pdl-go", done=DONE)
    assert names == [b"kbv3_gate_spin_at_pdl"]  # no DONE node: the caller's stream writes DONE
    port = gate_graph.CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC
    assert [a for a in fake.added if a[0] == "edge"] == [
        ("edge", 0x901, 0x10, DEFAULT, 0),
        ("edge", 0x901, 0x12, PROGRAMMATIC, port),
    ]
    assert fake.added[-2:] == [("instantiate", 0x100), ("destroy", 0x100)]


def test_pdl_go_of_an_empty_call_is_the_spin_alone():
    fake = _FakeGraphs({}, [])
    names: list[bytes] = []
    _driver(fake, names).gated_graph(0xC0FFEE, GO, TARGET, kind="pdl-go", done=DONE)
    assert names == [b"kbv3_gate_spin_at_pdl"] and not [a for a in fake.added if a[0] == "edge"]


def test_an_empty_call_goes_from_go_straight_to_done():
    fake = _FakeGraphs({}, [])
    _driver(fake, []).gated_graph(0xC0FFEE, GO, TARGET, kind="pdl", done=DONE)
    assert [a for a in fake.added if a[0] == "edge"] == [("edge", 0x901, 0x902, DEFAULT, 0)]


def test_a_driver_error_leaves_no_clone_behind():
    fake = _FakeGraphs({0x11: KERNEL}, [])
    fake.cuGraphAddDependencies_v2 = lambda *args: 801  # cudaErrorNotSupported, say
    with pytest.raises(gate.GateUnavailable, match="cuGraphAddDependencies_v2"):
        _driver(fake, []).gated_graph(0xC0FFEE, GO, TARGET, kind="pdl", done=DONE)
    assert fake.added[-1] == ("destroy", 0x100)


def test_a_private_blocks_owner_names_the_armed_seq_where_the_nodes_read_it():
    words = gate.GateWords(memoryview(bytearray(gate.GATE_BYTES)))
    words.target = 9
    assert words.target == 9 and words.go == words.done == 0


def test_the_hopper_spin_lets_its_dependents_start_only_once_go_opened():
    body = gate_kernels.SPIN_AT_PDL_PTX.decode()
    assert ".target sm_90" in body and body.count("griddepcontrol.launch_dependents") == 1
    # the timeout path returns first: a gate never opened lets nothing start early
    assert body.index("OPEN:") < body.index("griddepcontrol.launch_dependents")
    assert body.index("@%p2 bra SPIN;\n    ret;") < body.index("OPEN:")


@pytest.mark.parametrize("ptx", [gate_kernels.DONE_AT_PTX, gate_kernels.DONE_AT_PDL_PTX])
def test_the_done_node_writes_the_armed_seq_behind_a_fence_and_after_the_calls_work(ptx):
    body = ptx.decode()
    assert body.index("ld.volatile.u32 %r1, [%rd2]") < body.index("membar.sys") < body.index("st.volatile.u32 [%rd1]")
    if b"pdl" in ptx:
        assert body.index("griddepcontrol.wait") < body.index("st.volatile")  # the work's memory first


@pytest.mark.parametrize(
    "ptx, entry, arches",
    [
        (gate_kernels.DONE_AT_PTX, b"kbv3_done_at", ["sm_80", "sm_86", "sm_90"]),
        (gate_kernels.SPIN_AT_PDL_PTX, b"kbv3_gate_spin_at_pdl", ["sm_90"]),
        (gate_kernels.DONE_AT_PDL_PTX, b"kbv3_done_at_pdl", ["sm_90"]),
    ],
)
def test_the_graph_gates_kernels_are_valid_ptx(ptx, entry, arches, tmp_path):
    import shutil
    import subprocess
    from pathlib import Path

    import triton

    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    ptxas = str(bundled) if bundled.exists() else shutil.which("ptxas")
    if ptxas is None:
        pytest.skip("no ptxas on this machine")
    source = tmp_path / "gate.ptx"
    source.write_bytes(ptx.rstrip(b"\0"))
    for arch in arches:
        done = subprocess.run(
            [ptxas, f"-arch={arch}", str(source), "-o", str(tmp_path / "g.cubin")], capture_output=True
        )
        assert done.returncode == 0, (arch, done.stderr.decode())
    assert b".entry " + entry + b"(" in ptx


def test_the_graph_gates_are_chosen_by_name_under_mps_only(monkeypatch):
    for name in ("flat", "pdl", "pdl-go"):
        monkeypatch.setenv(gate.GATE_ENV, name)
        assert gate.gate_kind(True) == name and gate.gate_kind(False) == "wait"
    assert set(gate_graph.GRAPH_GATES) == {"node", "flat", "pdl", "pdl-go"}
    closes = {name: shape.done_in_graph for name, shape in gate_graph.GRAPH_GATES.items()}
    assert closes == {"node": False, "flat": True, "pdl": True, "pdl-go": False}
    assert gate_graph.GRAPH_GATES["pdl"].programmatic and gate_graph.GRAPH_GATES["pdl-go"].programmatic
    monkeypatch.setenv(gate.GATE_ENV, "pdl_go")
    with pytest.raises(ValueError, match="'pdl-go'"):
        gate.gate_kind(True)


def test_a_baseline_that_could_not_be_captured_names_the_spin_that_held_it():
    from kernelbench_v3.evaluate.supervisor.timing.local import GatedLocal, gate_held_by

    caller = GatedLocal.__new__(GatedLocal)  # no driver here: only its graphs matter
    caller.graphs = []
    assert gate_held_by("pdl-go", caller) == "spin" and gate_held_by("spin", caller) == "spin"
    assert gate_held_by("wait", caller) == "wait"
    caller.graphs = [0x400]
    assert gate_held_by("pdl-go", caller) == "pdl-go"
