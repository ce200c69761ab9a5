"""A gated graph: the call's captured graph with the gate's own nodes around it, built once per
input set and replayed for every call (`gate.Driver.gated_graph`).

Four shapes, one per graph gate (`GRAPH_GATES`):
- `node`: a spin node (`SPIN_AT_PTX`), then the captured graph as a child node; the caller's
  stream writes DONE behind the graph.
- `flat`: the captured graph's nodes themselves (a clone), the spin node ahead of its roots and
  a DONE node (`DONE_AT_PTX`) behind its leaves, so GO to the first kernel and the last kernel to
  DONE are each one edge inside one graph: no graph boundary, no stream write.
- `pdl` (Hopper): `flat` whose edges between the gate's nodes and the call's kernels are
  programmatic. The spin lets its dependents start the moment GO opens
  (`griddepcontrol.launch_dependents`), not once it has ended and flushed; the DONE node may start
  as the last kernels end and waits for their completion and memory (`griddepcontrol.wait`).
- `pdl-go` (Hopper): the call's own nodes behind the Hopper spin by programmatic edges, as under
  `pdl`, and no DONE node: the caller's stream writes DONE behind the graph, as under `node`
  (in one process a DONE node cost 1.2-1.3 us more than the stream's write; docs/timing.md).

How an honest call is held changes its window, never the bound on a solution's: no window of any
work is shorter than the fused echo's (`gate_kernels.ECHO_PTX`), whatever graph a solution builds.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from .gate_kernels import DONE_AT_PDL_PTX, DONE_AT_PTX, SPIN_AT_PDL_PTX, SPIN_AT_PTX

CU_GRAPH_NODE_TYPE_KERNEL = 0
CU_GRAPH_DEPENDENCY_TYPE_DEFAULT = 0
CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC = 1
CU_GRAPH_KERNEL_NODE_PORT_DEFAULT = 0
CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC = 1  # the dependent may start once the primary triggers


@dataclass(frozen=True)
class GraphGate:
    """How a graph gate closes its call: DONE by a node of the graph (else the stream's write
    behind it), and whether the gate's nodes meet the call's kernels by programmatic edges."""

    done_in_graph: bool
    programmatic: bool


GRAPH_GATES = {
    "node": GraphGate(done_in_graph=False, programmatic=False),
    "flat": GraphGate(done_in_graph=True, programmatic=False),
    "pdl": GraphGate(done_in_graph=True, programmatic=True),
    "pdl-go": GraphGate(done_in_graph=False, programmatic=True),
}


class _EdgeData(ctypes.Structure):
    """CUgraphEdgeData (CUDA 12.3): from_port, to_port, type, 5 reserved bytes."""

    _fields_ = [
        ("from_port", ctypes.c_ubyte),
        ("to_port", ctypes.c_ubyte),
        ("type", ctypes.c_ubyte),
        ("reserved", ctypes.c_ubyte * 5),
    ]


def edge_kind(node_type: int, programmatic: bool) -> int:
    """The dependency type between a gate node and a node of the call: programmatic only where
    asked and the call's node is a kernel (the driver allows it between kernel nodes alone)."""
    if programmatic and node_type == CU_GRAPH_NODE_TYPE_KERNEL:
        return CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
    return CU_GRAPH_DEPENDENCY_TYPE_DEFAULT


class _Builder:
    """The driver's cuGraph* calls over one template graph (`build_flat`)."""

    def __init__(self, driver: Any):
        self.driver = driver
        vp, node_p, size_p = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)
        fn = driver._graph_fn
        self.clone = fn("cuGraphClone", [node_p, vp])
        self.roots = fn("cuGraphGetRootNodes", [vp, node_p, size_p])
        self.nodes = fn("cuGraphGetNodes", [vp, node_p, size_p])
        # _v2: the first version refuses to list a node with programmatic edges (a lossy query)
        self.dependents = fn("cuGraphNodeGetDependentNodes_v2", [vp, node_p, ctypes.POINTER(_EdgeData), size_p])
        self.node_type = fn("cuGraphNodeGetType", [vp, ctypes.POINTER(ctypes.c_int)])
        self.add_edges = fn(
            "cuGraphAddDependencies_v2", [vp, node_p, node_p, ctypes.POINTER(_EdgeData), ctypes.c_size_t]
        )

    def listed(self, call: Any, *head: Any) -> list[int]:
        """The nodes a cuGraph* listing call names (asked twice: how many, then which)."""
        count = ctypes.c_size_t(0)
        self.driver._check(call(*head, None, ctypes.byref(count)), "a cuGraph listing")
        if count.value == 0:
            return []
        nodes = (ctypes.c_void_p * count.value)()
        self.driver._check(call(*head, nodes, ctypes.byref(count)), "a cuGraph listing")
        return [int(n or 0) for n in nodes[: count.value]]

    def is_leaf(self, node: int) -> bool:
        """Whether no node of the graph depends on `node` (only counted: no nodes, no edge data)."""
        count = ctypes.c_size_t(0)
        rc = self.dependents(ctypes.c_void_p(node), None, None, ctypes.byref(count))
        self.driver._check(rc, "cuGraphNodeGetDependentNodes_v2")
        return count.value == 0

    def type_of(self, node: int) -> int:
        kind = ctypes.c_int(-1)
        self.driver._check(self.node_type(ctypes.c_void_p(node), ctypes.byref(kind)), "cuGraphNodeGetType")
        return kind.value

    def edge(self, graph: int, before: int, after: int, kind: int) -> None:
        port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC if kind == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC else 0
        data = _EdgeData(port, 0, kind)
        rc = self.add_edges(
            ctypes.c_void_p(graph), (ctypes.c_void_p * 1)(before), (ctypes.c_void_p * 1)(after), ctypes.byref(data), 1
        )
        self.driver._check(rc, "cuGraphAddDependencies_v2")


def build_flat(driver: Any, child: int, go: int, done: int, target: int, limit_ns: int, shape: GraphGate) -> int:
    """An executable graph of `shape` (`flat`, `pdl` or `pdl-go`) around a clone of `child` (a
    cudaGraph_t the caller keeps), GO at `go`, DONE at `done` (when the graph writes it), the
    armed seq at `target`; its handle."""
    b = _Builder(driver)
    graph = ctypes.c_void_p(0)
    driver._check(b.clone(ctypes.byref(graph), ctypes.c_void_p(child)), "cuGraphClone")
    g = int(graph.value or 0)
    programmatic = shape.programmatic
    try:
        roots = b.listed(b.roots, ctypes.c_void_p(g))
        leaves = [n for n in b.listed(b.nodes, ctypes.c_void_p(g)) if b.is_leaf(n)]
        spin_ptx, spin_name = (
            (SPIN_AT_PDL_PTX, b"kbv3_gate_spin_at_pdl") if programmatic else (SPIN_AT_PTX, b"kbv3_gate_spin_at")
        )
        spin = driver.add_kernel_node(g, spin_ptx, spin_name, go, target, limit_ns)
        for root in roots:
            b.edge(g, spin, root, edge_kind(b.type_of(root), programmatic))
        if shape.done_in_graph:
            done_ptx, done_name = (
                (DONE_AT_PDL_PTX, b"kbv3_done_at_pdl") if programmatic else (DONE_AT_PTX, b"kbv3_done_at")
            )
            closer = driver.add_kernel_node(g, done_ptx, done_name, done, target)
            for leaf in leaves:
                b.edge(g, leaf, closer, edge_kind(b.type_of(leaf), programmatic))
            if not roots:  # an empty call: GO straight to DONE
                b.edge(g, spin, closer, CU_GRAPH_DEPENDENCY_TYPE_DEFAULT)
        return driver.instantiate(g)
    finally:
        driver._graph_fn("cuGraphDestroy", [ctypes.c_void_p])(ctypes.c_void_p(g))
