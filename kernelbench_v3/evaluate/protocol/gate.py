"""The gate: a timed call's GPU work held behind a word of host memory, released by the timer.

To arm call `seq`, the process that owns the call enqueues on one stream: wait until the word GO
is at least `seq` (`cuStreamWaitValue32`), the call's work, then write `seq` into the word DONE
(`cuStreamWriteValue32`). The timer's window is from its host write of GO to the moment its host
sees DONE: no launch, no synchronisation and no host code of the caller's sits inside it, only
the GPU's own work (and, between two processes' contexts, a context switch the echo's window
measures). Both words live in host memory the caller registered with `cuMemHostRegister`, so
the GPU polls and writes it directly; the timer needs no CUDA at all to ring the gate.

Two ways to hold the stream at GO. `spin` (the default under MPS): a one-thread kernel that
reads the word until it reaches `seq` (`SPIN_PTX`), then exits; it holds one SM until GO, while
the timer prepares the call, and is bounded (`SPIN_LIMIT_NS`) so a gate never rung cannot hold
the GPU. `wait` (KBV3_GATE=wait, and always without MPS, where a spin would hold the caller's
context on the GPU and starve the timer's flush): the stream's own wait on the word
(`cuStreamWaitValue32`), which holds no SM but wakes a call about 9 or about 16 us after GO on
the H200 under MPS, call by call (docs/timing.md). `node` (KBV3_GATE=node, for measurement): the
spin as the first node of a graph whose second is the call's own captured graph
(`Driver.gated_graph`, `SPIN_AT_PTX`), so GO to the call's first kernel is one edge inside a
graph rather than a kernel and then a graph launch on the stream.

The echo's call is the fused echo under MPS (`ECHO_PTX`, `echo_kind`): GO read and DONE written
by one resident kernel, nothing between them. How a call is held and closed is the choice of the
process that enqueues it, and a solution's process is adversarial: with an echo held the way an
honest call is, a solution holding its call a faster way (a spin where the echo waits, the gate
inside its own kernel) would be scored short by the difference. No window of any work can be
shorter than the fused echo's, so the window less the echo's is never less than the work's own
time (docs/threat-model.md).

This module holds the driver calls torch does not expose (`Driver`) and `GateWords`, the two
words as a host-side view and as device addresses. It is used by the solution process and the
echo (their doorbell block in the arena) and by the trusted baseline child (a private page).
"""

from __future__ import annotations

import ctypes
import mmap
import os
from typing import Any

from .gate_graph import GRAPH_GATES, build_flat
from .gate_kernels import DONE_NOW_PTX, ECHO_PTX, SPIN_AT_PTX, SPIN_PTX

GATE_TARGET_OFFSET = 32  # the doorbell's WAKE word (`protocol.doorbell`), its low 32 bits: the armed call's seq
GATE_DONE_OFFSET = 48  # bytes into the doorbell block: a cache line apart from GO
GATE_GO_OFFSET = 64
GATE_BYTES = 128  # the block registered with the driver
CU_STREAM_WAIT_VALUE_GEQ = 0x0
CU_STREAM_WRITE_VALUE_DEFAULT = 0x0
CU_MEMHOSTREGISTER_PORTABLE_DEVICEMAP = 0x1 | 0x2
CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712
CU_STREAM_NON_BLOCKING = 0x1
ECHO_ENV = "KBV3_ECHO"  # "fused" or "graph" overrides `echo_kind`'s choice (the bench compares them)
GATE_ENV = "KBV3_GATE"  # "spin", "wait", a graph gate's name or "hold" overrides `gate_kind`'s choice (the bench compares them)
MPS_SHARE_ENV = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"  # an MPS client's cap on the SMs it may use
SPIN_LIMIT_NS = 10 * 10**9  # a spin never rung ends after this; the arm-to-ring of a call is ms


def default_gate(capability: tuple[int, int]) -> str:
    """How a call is held under MPS unless KBV3_GATE says otherwise: inside its own captured
    graph, behind the gate's spin node, by programmatic edges on Hopper and newer ("pdl-go") and
    plainly before ("node"). On an H100 under MPS the null-call ladder came out at +0.86 to +1.68
    us over rotating under pdl-go and +1.15 to +1.71 under node, against +1.81 to +2.68 under the
    spin kernel ahead of the graph (docs/timing.md, "The graph gates")."""
    return "pdl-go" if tuple(capability) >= (9, 0) else "node"


def _device_capability() -> tuple[int, int]:
    """The current CUDA device's compute capability (a process that holds the gate has CUDA)."""
    import torch

    major, minor = torch.cuda.get_device_capability()
    return int(major), int(minor)


def gate_kind(under_mps: bool) -> str:
    """How gated calls hold at GO. Under MPS: `default_gate` for this GPU, unless KBV3_GATE names
    "spin" (the gate's spin kernel ahead of the call's graph), "wait" (the stream's wait), a
    graph gate (`gate_graph.GRAPH_GATES`: "node", "flat", "pdl", "pdl-go") or "hold" (the
    occupancy gate, `protocol.hold`: the timer owns every SM until GO, and nothing of the
    caller's holds the call). Without MPS always "wait" (a spinning client would starve the
    timer's flush, and time-sliced contexts share no SMs to hold)."""
    if not under_mps:
        _asked()  # a misspelt KBV3_GATE is an error in every mode
        return "wait"
    return _asked() or default_gate(_device_capability())


def _asked() -> str:
    """The gate KBV3_GATE names, as it applies under MPS ('' for this GPU's default)."""
    choice = os.environ.get(GATE_ENV, "").strip().lower()
    if choice not in ("", "spin", "wait", "hold", *GRAPH_GATES):
        names = ", ".join(repr(n) for n in ("spin", "wait", *GRAPH_GATES))
        raise ValueError(f"{GATE_ENV}={choice!r}: expected {names} or 'hold'")
    if choice == "hold" and os.environ.get(MPS_SHARE_ENV, "100").strip() not in ("", "100"):
        return ""  # HOLD must take every SM, and a client capped to a share of them cannot
    return choice


def echo_kind(under_mps: bool) -> str:
    """What the echo's gated call is: "fused" (`ECHO_PTX`, GO to DONE in one resident kernel)
    under MPS, unless KBV3_ECHO names "graph" (the stream's gate around a graph of one tiny
    kernel, as a solution's call is held). Without MPS always "graph": a resident kernel would
    hold the echo's context on the GPU and starve the timer's flush."""
    choice = os.environ.get(ECHO_ENV, "").strip().lower()
    if choice not in ("", "fused", "graph"):
        raise ValueError(f"{ECHO_ENV}={choice!r}: expected 'fused' or 'graph'")
    if under_mps and _asked() == "hold":
        return "held"  # the occupancy gate's echo: DONE written the moment HOLD lets it run
    return "fused" if under_mps and choice != "graph" else "graph"


class GateUnavailable(Exception):
    """This driver or device cannot hold a stream behind a host word."""


class _KernelNodeParams(ctypes.Structure):
    """CUDA_KERNEL_NODE_PARAMS as `cuGraphAddKernelNode` (the first version) takes it."""

    _fields_ = [
        ("func", ctypes.c_void_p),
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("shared_mem_bytes", ctypes.c_uint),
        ("kernel_params", ctypes.c_void_p),
        ("extra", ctypes.c_void_p),
    ]


class Driver:
    """The few CUDA driver calls the gate needs, through ctypes (torch exposes none of them)."""

    def __init__(self) -> None:
        try:
            self.cu = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise GateUnavailable(f"no CUDA driver library: {exc}") from None
        self._wait = self._fn("cuStreamWaitValue32_v2", "cuStreamWaitValue32")
        self._write = self._fn("cuStreamWriteValue32_v2", "cuStreamWriteValue32")
        for f in (self._wait, self._write):
            f.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
            f.restype = ctypes.c_int
        self._register = self._fn("cuMemHostRegister_v2", "cuMemHostRegister")
        self._register.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
        self._register.restype = ctypes.c_int
        self._device_pointer = self._fn("cuMemHostGetDevicePointer_v2", "cuMemHostGetDevicePointer")
        self._device_pointer.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p, ctypes.c_uint]
        self._device_pointer.restype = ctypes.c_int
        self._stream_create = self._fn("cuStreamCreate")
        self._stream_create.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
        self._stream_create.restype = ctypes.c_int
        self._unregister = self._fn("cuMemHostUnregister")
        self._unregister.argtypes = [ctypes.c_void_p]
        self._unregister.restype = ctypes.c_int
        self._module_load = self._fn("cuModuleLoadData")
        self._module_load.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
        self._module_load.restype = ctypes.c_int
        self._get_function = self._fn("cuModuleGetFunction")
        self._get_function.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
        self._get_function.restype = ctypes.c_int
        self._launch = self._fn("cuLaunchKernel")
        self._launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        self._launch.restype = ctypes.c_int
        self._kernels: dict[bytes, ctypes.c_void_p] = {}  # the gate's kernels, loaded into the context on first use
        self._graph_calls: dict[str, Any] = {}  # cuGraph* calls, looked up on first use (`gated_graph`)

    def _fn(self, *names: str) -> Any:
        for name in names:
            try:
                return getattr(self.cu, name)
            except AttributeError:
                continue
        raise GateUnavailable(f"the CUDA driver has none of {names}")

    @staticmethod
    def _check(rc: int, what: str) -> None:
        if rc != 0:
            raise GateUnavailable(f"{what} returned CUresult {rc}")

    def register(self, address: int, nbytes: int, fresh: bool = False) -> int:
        """Page-lock and map host memory for the current context; its device address.

        `fresh`: a registration already there is dropped and made again. A long-lived process
        (the supervisor) must ask for it: a registration outlives an unmapped block, and a new
        block mapped at the same address would otherwise get the old pages' device address."""
        rc = self._register(ctypes.c_void_p(address), ctypes.c_size_t(nbytes), CU_MEMHOSTREGISTER_PORTABLE_DEVICEMAP)
        if rc == CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED and fresh:
            self.unregister(address)
            rc = self._register(
                ctypes.c_void_p(address), ctypes.c_size_t(nbytes), CU_MEMHOSTREGISTER_PORTABLE_DEVICEMAP
            )
        if rc not in (0, CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED):
            self._check(rc, "cuMemHostRegister")
        device = ctypes.c_uint64(0)
        self._check(
            self._device_pointer(ctypes.byref(device), ctypes.c_void_p(address), 0), "cuMemHostGetDevicePointer"
        )
        return device.value

    def create_stream(self) -> int:
        """A new non-blocking stream of the current context, owned by the caller (its handle)."""
        handle = ctypes.c_void_p(0)
        self._check(self._stream_create(ctypes.byref(handle), CU_STREAM_NON_BLOCKING), "cuStreamCreate")
        return int(handle.value or 0)

    def unregister(self, address: int) -> None:
        """Drop this context's registration of the host block at `address` (if any)."""
        self._unregister(ctypes.c_void_p(address))

    def wait_geq(self, stream: Any, address: int, value: int) -> None:
        rc = self._wait(ctypes.c_void_p(stream.cuda_stream), address, value, CU_STREAM_WAIT_VALUE_GEQ)
        self._check(rc, "cuStreamWaitValue32")

    def _kernel(self, ptx: bytes, name: bytes) -> ctypes.c_void_p:
        if name not in self._kernels:
            module, function = ctypes.c_void_p(0), ctypes.c_void_p(0)
            self._check(self._module_load(ctypes.byref(module), ptx), f"cuModuleLoadData ({name.decode()})")
            self._check(self._get_function(ctypes.byref(function), module, name), "cuModuleGetFunction")
            self._kernels[name] = function
        return self._kernels[name]

    def launch(self, function: Any, stream: Any, blocks: int, threads: int, *args: Any) -> None:
        """Launch `function` on `stream` over `blocks` x `threads` with `args` (ctypes values)."""
        params = (ctypes.c_void_p * len(args))(*(ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args))
        rc = self._launch(function, blocks, 1, 1, threads, 1, 1, 0, ctypes.c_void_p(stream.cuda_stream), params, None)
        self._check(rc, "cuLaunchKernel (the gate's kernel)")

    def _launch_one_thread(self, function: ctypes.c_void_p, stream: Any, *args: Any) -> None:
        self.launch(function, stream, 1, 1, *args)

    def spin_geq(self, stream: Any, address: int, value: int, limit_ns: int = SPIN_LIMIT_NS) -> None:
        """Enqueue `kbv3_gate_spin` on `stream`: one thread reading the word until it is >= value."""
        function = self._kernel(SPIN_PTX, b"kbv3_gate_spin")
        self._launch_one_thread(
            function, stream, ctypes.c_uint64(address), ctypes.c_uint32(value), ctypes.c_uint64(limit_ns)
        )

    def echo_call(self, stream: Any, go: int, done: int, value: int, limit_ns: int = SPIN_LIMIT_NS) -> None:
        """Enqueue `kbv3_gate_echo` on `stream`: GO >= value read, then DONE = value written, in one kernel."""
        function = self._kernel(ECHO_PTX, b"kbv3_gate_echo")
        args = (ctypes.c_uint64(go), ctypes.c_uint64(done), ctypes.c_uint32(value), ctypes.c_uint64(limit_ns))
        self._launch_one_thread(function, stream, *args)

    def done_now(self, stream: Any, done: int, value: int) -> None:
        """Enqueue `kbv3_done_now` on `stream`: DONE = value the moment it runs (`DONE_NOW_PTX`)."""
        function = self._kernel(DONE_NOW_PTX, b"kbv3_done_now")
        self._launch_one_thread(function, stream, ctypes.c_uint64(done), ctypes.c_uint32(value))

    def _graph_fn(self, name: str, argtypes: list[Any]) -> Any:
        if name not in self._graph_calls:
            f = self._fn(name)
            f.argtypes, f.restype = argtypes, ctypes.c_int
            self._graph_calls[name] = f
        return self._graph_calls[name]

    def add_kernel_node(self, graph: int, ptx: bytes, name: bytes, *args: int) -> int:
        """A one-thread node of kernel `name` (loaded from `ptx`) in `graph`, no dependencies,
        its parameters `args` (each a 64-bit value); the node's handle."""
        vp, node_p = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
        values = [ctypes.c_uint64(a) for a in args]
        params = (vp * len(values))(*(ctypes.cast(ctypes.byref(v), vp) for v in values))
        spec = _KernelNodeParams(self._kernel(ptx, name), (1, 1, 1), (1, 1, 1), 0, ctypes.cast(params, vp), None)
        add = self._graph_fn(
            "cuGraphAddKernelNode", [node_p, vp, node_p, ctypes.c_size_t, ctypes.POINTER(_KernelNodeParams)]
        )
        node = vp(0)
        self._check(add(ctypes.byref(node), vp(graph), None, 0, ctypes.byref(spec)), "cuGraphAddKernelNode")
        return int(node.value or 0)

    def instantiate(self, graph: int) -> int:
        """`graph` made executable (the template stays the caller's to destroy)."""
        vp = ctypes.c_void_p
        exe = vp(0)
        instantiate = self._graph_fn("cuGraphInstantiateWithFlags", [ctypes.POINTER(vp), vp, ctypes.c_ulonglong])
        self._check(instantiate(ctypes.byref(exe), vp(graph), 0), "cuGraphInstantiateWithFlags")
        return int(exe.value or 0)

    def gated_graph(
        self, child: int, go: int, target: int, limit_ns: int = SPIN_LIMIT_NS, kind: str = "node", done: int = 0
    ) -> int:
        """A new executable graph for the graph gate `kind` (`gate_graph.GRAPH_GATES`) around the
        graph `child` (a cudaGraph_t): for "node", a node of `kbv3_gate_spin_at` (GO >= the word
        at `target`), then `child` cloned as a child node; for the others, `child`'s own nodes
        behind a spin node, and for "flat" and "pdl" ahead of a DONE node (at `done`,
        `gate_graph.build_flat`). Its handle, to launch with `launch_graph` for every call."""
        if kind != "node":
            return build_flat(self, child, go, done, target, limit_ns, GRAPH_GATES[kind])
        vp, node_p = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
        graph, body = vp(0), vp(0)
        create = self._graph_fn("cuGraphCreate", [node_p, ctypes.c_uint])
        self._check(create(ctypes.byref(graph), 0), "cuGraphCreate")
        spin = vp(self.add_kernel_node(graph.value or 0, SPIN_AT_PTX, b"kbv3_gate_spin_at", go, target, limit_ns))
        add_child = self._graph_fn("cuGraphAddChildGraphNode", [node_p, vp, node_p, ctypes.c_size_t, vp])
        self._check(add_child(ctypes.byref(body), graph, ctypes.byref(spin), 1, vp(child)), "cuGraphAddChildGraphNode")
        exe = self.instantiate(graph.value or 0)
        self._graph_fn("cuGraphDestroy", [vp])(graph)  # the executable keeps what it needs
        return exe

    def launch_graph(self, stream: Any, executable: int) -> None:
        launch = self._graph_fn("cuGraphLaunch", [ctypes.c_void_p, ctypes.c_void_p])
        self._check(launch(ctypes.c_void_p(executable), ctypes.c_void_p(stream.cuda_stream)), "cuGraphLaunch")

    def write(self, stream: Any, address: int, value: int) -> None:
        rc = self._write(ctypes.c_void_p(stream.cuda_stream), address, value, CU_STREAM_WRITE_VALUE_DEFAULT)
        self._check(rc, "cuStreamWriteValue32")


class GateWords:
    """GO and DONE: 32-bit words at fixed offsets of a host block, readable and writable by the
    host through `words`, and by the GPU at `go_device` / `done_device` once `register`ed."""

    def __init__(self, block: memoryview):
        if len(block) < GATE_BYTES:
            raise ValueError(f"a gate needs {GATE_BYTES} bytes")
        self._words = block[:GATE_BYTES].cast("B").cast("I")
        self.go_device = self.done_device = self.target_device = 0

    @property
    def go(self) -> int:
        return int(self._words[GATE_GO_OFFSET // 4])

    @go.setter
    def go(self, value: int) -> None:
        self._words[GATE_GO_OFFSET // 4] = value

    @property
    def done(self) -> int:
        return int(self._words[GATE_DONE_OFFSET // 4])

    @done.setter
    def done(self, value: int) -> None:
        self._words[GATE_DONE_OFFSET // 4] = value

    @property
    def target(self) -> int:
        return int(self._words[GATE_TARGET_OFFSET // 4])

    @target.setter
    def target(self, value: int) -> None:
        """The armed call's seq, where a gated graph's spin and DONE nodes read it (in the
        doorbell, the low half of WAKE; a private block's owner writes it before arming)."""
        self._words[GATE_TARGET_OFFSET // 4] = value

    def release(self) -> None:
        """Drop this view of the block (so the memory under it can be closed); unusable after."""
        self._words.release()

    def register(self, driver: Driver, address: int, fresh: bool = False) -> None:
        """Map the block (host address `address`) for this process's CUDA context."""
        base = driver.register(address, GATE_BYTES, fresh)
        self.go_device, self.done_device = base + GATE_GO_OFFSET, base + GATE_DONE_OFFSET
        self.target_device = base + GATE_TARGET_OFFSET

    def enqueue(self, driver: Driver, stream: Any, seq: int, work: Any, spin: bool = False) -> None:
        """On `stream`: hold until GO >= seq (a spin kernel if `spin`, else the stream's wait),
        `work()` (which enqueues on the current stream), then DONE = seq. Nothing here waits for
        the device."""
        import torch

        with torch.cuda.stream(stream):
            if spin:
                driver.spin_geq(stream, self.go_device, seq)
            else:
                driver.wait_geq(stream, self.go_device, seq)
            work()
            driver.write(stream, self.done_device, seq)

    def enqueue_gated_graph(
        self, driver: Driver, stream: Any, seq: int, executable: int, done_in_graph: bool = False
    ) -> None:
        """On `stream`: a graph of `Driver.gated_graph` (its own first node holds it until GO >=
        seq, the seq the doorbell's WAKE word holds while the call is armed), then DONE = seq,
        unless the graph's own last node writes it (`done_in_graph`)."""
        driver.launch_graph(stream, executable)
        if not done_in_graph:
            driver.write(stream, self.done_device, seq)

    def enqueue_echo(self, driver: Driver, stream: Any, seq: int, held: bool = False) -> None:
        """On `stream`: the fused echo call (`ECHO_PTX`), GO >= seq to DONE = seq in one kernel;
        if `held`, the held echo (`DONE_NOW_PTX`), DONE = seq once HOLD lets it run."""
        if held:
            driver.done_now(stream, self.done_device, seq)
        else:
            driver.echo_call(stream, self.go_device, self.done_device, seq)


def private_block() -> tuple[mmap.mmap, memoryview, int]:
    """A page of anonymous host memory for an in-process gate: (mapping, view, address)."""
    page = mmap.mmap(-1, mmap.PAGESIZE)
    view = memoryview(page)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    return page, view, address
