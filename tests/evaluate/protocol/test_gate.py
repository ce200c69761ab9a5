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


def test_under_mps_the_call_is_held_in_its_own_graph_by_the_gpus_default_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv(gate.GATE_ENV, raising=False)
    for capability, held in (((9, 0), "pdl-go"), ((10, 0), "pdl-go"), ((8, 6), "node"), ((8, 0), "node")):
        monkeypatch.setattr(gate, "_device_capability", lambda c=capability: c)
        assert gate.gate_kind(True) == held and gate.gate_kind(False) == "wait"
    monkeypatch.setenv(gate.GATE_ENV, " Spin ")
    assert gate.gate_kind(True) == "spin"
    assert gate.gate_kind(False) == "wait"  # a spin without MPS would starve the timer's flush
    monkeypatch.setenv(gate.GATE_ENV, "wait")
    assert gate.gate_kind(True) == "wait"
    monkeypatch.setenv(gate.GATE_ENV, "node")  # the spin heading the call's own graph
    assert gate.gate_kind(True) == "node" and gate.gate_kind(False) == "wait"
    monkeypatch.setenv(gate.GATE_ENV, "busy")
    with pytest.raises(ValueError, match="KBV3_GATE='busy'"):
        gate.gate_kind(True)


def test_the_echo_is_fused_under_mps_unless_told_otherwise_and_never_without(monkeypatch):
    monkeypatch.delenv(gate.ECHO_ENV, raising=False)
    assert gate.echo_kind(True) == "fused" and gate.echo_kind(False) == "graph"
    monkeypatch.setenv(gate.ECHO_ENV, "Graph")
    assert gate.echo_kind(True) == "graph"
    monkeypatch.setenv(gate.ECHO_ENV, "fused")
    assert gate.echo_kind(False) == "graph"  # a resident kernel would starve the timer's flush
    monkeypatch.setenv(gate.ECHO_ENV, "fast")
    with pytest.raises(ValueError, match="KBV3_ECHO='fast'"):
        gate.echo_kind(True)


def _ptxas():
    import shutil
    from pathlib import Path

    import triton

    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    return str(bundled) if bundled.exists() else shutil.which("ptxas")


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_90"])  # A100, the RTX 3090, H100/H200
@pytest.mark.parametrize(
    "ptx, entry",
    [
        (gate.SPIN_PTX, b"kbv3_gate_spin"),
        (gate.SPIN_AT_PTX, b"kbv3_gate_spin_at"),
        (gate.ECHO_PTX, b"kbv3_gate_echo"),
    ],
)
def test_the_gate_kernels_are_valid_ptx_for_every_gpu_of_the_benchmark(arch, ptx, entry, tmp_path):
    import subprocess

    ptxas = _ptxas()
    if ptxas is None:
        pytest.skip("no ptxas on this machine")
    source = tmp_path / "gate.ptx"
    source.write_bytes(ptx.rstrip(b"\0"))
    done = subprocess.run(
        [ptxas, f"-arch={arch}", str(source), "-o", str(tmp_path / "gate.cubin")], capture_output=True
    )
    assert done.returncode == 0, done.stderr.decode()
    assert ptx.endswith(b"\0") and b".entry " + entry + b"(" in ptx


def test_the_fused_echo_writes_done_only_after_go_opened_and_behind_a_system_fence():
    body = gate.ECHO_PTX.decode()
    opened = body.index("OPEN:")
    store = body.index("st.volatile.u32 [%rd6], %r1")  # DONE = seq
    assert body.index("ret;") < opened < store  # never opened within the limit: it returns without DONE
    assert body.index("membar.sys", opened) < store < body.rindex("membar.sys")
    assert body.count("st.") == 1  # DONE is the only word it writes


class _FakeCu:
    """The three driver calls `spin_geq` and `echo_call` make, recorded (no GPU here)."""

    def __init__(self):
        self.loads, self.launches, self.names = 0, [], []

    def load(self, module, image):
        self.loads += 1
        module._obj.value = 11
        return 0

    def get_function(self, function, module, name):
        self.names.append(name)
        function._obj.value = 22 if name == b"kbv3_gate_spin" else 33
        return 0

    def launch(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        import ctypes

        kinds = (ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint64)
        if f.value == 33:  # kbv3_gate_echo(go, done, seq, limit_ns)
            kinds = (ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint64)
        args = tuple(ctypes.cast(params[i], ctypes.POINTER(k)).contents.value for i, k in enumerate(kinds))
        self.launches.append((f.value, (gx, gy, gz, bx, by, bz, shared), stream.value, *args, extra))
        return 0


def _fake_driver(fake):
    driver = gate.Driver.__new__(gate.Driver)  # no libcuda here: the three calls are the fake's
    driver._module_load, driver._get_function, driver._launch = fake.load, fake.get_function, fake.launch
    driver._kernels = {}
    return driver


class _Stream:
    cuda_stream = 0x5000


def test_spin_geq_loads_the_kernel_once_and_passes_word_seq_and_limit():
    fake = _FakeCu()
    driver = _fake_driver(fake)
    driver.spin_geq(_Stream(), 0x7F00_0000_1040, 9)
    driver.spin_geq(_Stream(), 0x7F00_0000_1040, 2**32 - 1, limit_ns=5)
    assert fake.loads == 1  # loaded into the context once
    first, second = fake.launches
    assert first == (22, (1, 1, 1, 1, 1, 1, 0), 0x5000, 0x7F00_0000_1040, 9, gate.SPIN_LIMIT_NS, None)
    assert second[4:6] == (2**32 - 1, 5)


def test_the_fused_echo_is_its_own_kernel_given_go_done_seq_and_limit():
    fake = _FakeCu()
    driver = _fake_driver(fake)
    words = gate.GateWords(memoryview(bytearray(gate.GATE_BYTES)))
    words.go_device, words.done_device = 0x7F00_0000_1040, 0x7F00_0000_1030
    words.enqueue_echo(driver, _Stream(), 7)
    driver.spin_geq(_Stream(), 0x40, 1)
    words.enqueue_echo(driver, _Stream(), 8)
    assert fake.names == [b"kbv3_gate_echo", b"kbv3_gate_spin"]  # each loaded once
    echo = fake.launches[0]
    assert echo == (33, (1, 1, 1, 1, 1, 1, 0), 0x5000, 0x7F00_0000_1040, 0x7F00_0000_1030, 7, gate.SPIN_LIMIT_NS, None)
    assert fake.launches[2][5] == 8


def test_a_driver_error_in_the_spin_is_gate_unavailable():
    fake = _FakeCu()
    driver = _fake_driver(fake)
    driver._module_load = lambda module, image: 218
    with pytest.raises(gate.GateUnavailable, match="cuModuleLoadData"):
        driver.spin_geq(_Stream(), 64, 1)
    driver._launch = lambda *args: 700
    driver._module_load = fake.load
    with pytest.raises(gate.GateUnavailable, match="cuLaunchKernel"):
        driver.echo_call(_Stream(), 64, 48, 1)


def test_the_spin_node_reads_the_armed_calls_seq_from_the_doorbells_wake_word():
    from kernelbench_v3.evaluate.protocol import doorbell

    assert gate.GATE_TARGET_OFFSET == doorbell.WAKE * 8  # the low 32 bits of WAKE (little-endian)
    assert gate.GATE_TARGET_OFFSET + 8 <= gate.GATE_DONE_OFFSET  # inside the registered block, apart from DONE
    body = gate.SPIN_AT_PTX.decode()
    assert body.index("ld.volatile.u32 %r1, [%rd6]") < body.index("SPIN:")  # the target read once, first
    assert "st." not in body  # it writes nothing


def test_gated_graph_puts_a_spin_node_ahead_of_the_child_graph_and_instantiates_it():
    import ctypes

    fake, made = _FakeCu(), []
    driver = _fake_driver(fake)
    driver._graph_calls = {}

    def create(graph, flags):
        graph._obj.value = 0x100
        made.append(("create", flags))
        return 0

    def add_kernel(node, graph, deps, count, params):
        p = params._obj  # byref(...) of the struct
        values = [ctypes.cast(p.kernel_params, ctypes.POINTER(ctypes.c_void_p))[i] for i in range(3)]
        args = [ctypes.cast(v, ctypes.POINTER(ctypes.c_uint64)).contents.value for v in values]
        made.append(("kernel", graph.value, count, p.func, list(p.grid), list(p.block), args))
        node._obj.value = 0x200
        return 0

    def add_child(node, graph, deps, count, child):
        made.append(("child", graph.value, deps._obj.value, count, child.value))
        node._obj.value = 0x300
        return 0

    def instantiate(exe, graph, flags):
        made.append(("instantiate", graph.value, flags))
        exe._obj.value = 0x400
        return 0

    def launch(exe, stream):
        made.append(("launch", exe.value, stream.value))
        return 0

    def destroy(graph):
        made.append(("destroy", graph.value))
        return 0

    calls = {
        "cuGraphCreate": create,
        "cuGraphAddKernelNode": add_kernel,
        "cuGraphAddChildGraphNode": add_child,
        "cuGraphInstantiateWithFlags": instantiate,
        "cuGraphLaunch": launch,
        "cuGraphDestroy": destroy,
    }
    driver._graph_fn = lambda name, argtypes: calls[name]
    exe = driver.gated_graph(0xC0FFEE, go=0x7F00_0040, target=0x7F00_0020)
    driver.launch_graph(_Stream(), exe)
    assert exe == 0x400
    assert made == [
        ("create", 0),
        ("kernel", 0x100, 0, 33, [1, 1, 1], [1, 1, 1], [0x7F00_0040, 0x7F00_0020, gate.SPIN_LIMIT_NS]),
        ("child", 0x100, 0x200, 1, 0xC0FFEE),  # behind the spin node, and only it
        ("instantiate", 0x100, 0),
        ("destroy", 0x100),  # the template graph, once instantiated
        ("launch", 0x400, 0x5000),
    ]
    assert fake.names == [b"kbv3_gate_spin_at"]
    params = gate._KernelNodeParams  # CUDA_KERNEL_NODE_PARAMS: 8 + 3*4 + 3*4 + 4, padded, then 2 pointers
    assert (params.kernel_params.offset, params.extra.offset, ctypes.sizeof(params)) == (40, 48, 56)


def test_a_graph_behind_the_spin_node_is_launched_then_done_written_unless_it_writes_done_itself():
    steps = []

    class Driver:
        def launch_graph(self, stream, executable):
            steps.append(("graph", executable))

        def write(self, stream, address, seq):
            steps.append(("write", address, seq))

    words = gate.GateWords(memoryview(bytearray(gate.GATE_BYTES)))
    words.done_device = 48
    words.enqueue_gated_graph(Driver(), _Stream(), 9, 0x400)
    assert steps == [("graph", 0x400), ("write", 48, 9)]
    words.enqueue_gated_graph(Driver(), _Stream(), 10, 0x500, done_in_graph=True)  # flat, pdl
    assert steps[2:] == [("graph", 0x500)]
