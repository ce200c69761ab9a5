"""The typed messages between the supervisor and a solution process.

Each message is a frozen dataclass with a `kind`; on the wire it is JSON (`to_json`). What the
supervisor sends is trusted by construction. What the solution process sends is parsed with
`parse_reply` into one of the reply dataclasses (`Ready`, `SetupDone`, `Failed`, `CaseDone`,
`TimingReady`, `CallsDone`, `Finished`), every field's type and size checked (`ProtocolError`
otherwise): those replies are evidence to check, never a verdict.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar, Union

from ...vocab import Device
from .channel import ProtocolError, TensorRef

MAX_LIST = 100_000
MAX_TEXT = 8_000


# --- supervisor -> solution process -------------------------------------------------------


@dataclass(frozen=True)
class ShapeSetup:
    init_args: list[Any]  # get_init_inputs() of the problem at this shape (JSON values)
    state: dict[str, TensorRef]  # the re-randomized reference state dict, in the arena


@dataclass(frozen=True)
class Setup:
    device: Device
    solution_path: str
    shapes: dict[str, ShapeSetup]
    memory_fraction: float  # CUDA: the share of device memory the process may allocate
    kind: str = "setup"


@dataclass(frozen=True)
class Slot:
    """Where the solution process writes one output: `capacity` bytes at `offset`."""

    offset: int
    capacity: int


@dataclass(frozen=True)
class RunCase:
    case: str
    shape: str
    args: list[dict[str, Any]]  # {"tensor": TensorRef} or {"value": JSON}
    slot: Slot
    reuse_buffers_of: str | None = None  # write the new values into that case's input tensors
    evidence: bool = False  # record kernels and dispatched ops while this case runs
    kind: str = "run_case"


@dataclass(frozen=True)
class PrepareTiming:
    """Map the supervisor's timing region and its layout (input sets, output slots)."""

    region: dict[str, Any]  # {"cuda_ipc": cuda_ipc.export(...)} or {"arena": [offset, nbytes]}
    layout: dict[str, Any]  # timing.memory.TimedMemory.layout()
    doorbell: int  # the arena offset of the doorbell's words
    kind: str = "prepare_timing"


@dataclass(frozen=True)
class Capture:
    """Capture one CUDA graph of one call per input set (CUDA only), and say where each graph's
    output lies (CUDA IPC) so the supervisor can read it in place."""

    keep_graphs: bool = False  # keep each cudaGraph_t, for a spin node to head it (`gate.Driver.gated_graph`)
    kind: str = "capture"


@dataclass(frozen=True)
class Calls:
    """Serve one-call windows through the doorbell (`doorbell`) from sequence number `first`
    until the supervisor names the set STOP_SET; then reply `calls_done`."""

    first: int
    evidence: bool = False  # collect kernel evidence over these calls (not scored)
    gated: bool = False  # arm each captured call behind the gate (`gate`) instead of polling GO
    spin: bool = False  # hold each gated call at GO with the gate's spin kernel, not the stream's wait
    fused_echo: bool = False  # the echo only: each gated call is the fused echo kernel (`gate.ECHO_PTX`)
    spin_node: bool = False  # hold each gated call by a spin node heading its own graph (`gate.Driver.gated_graph`)
    held: bool = False  # the timer's HOLD owns every SM until GO (`hold`); the echo's call is the held echo
    graph_gate: str = "node"  # with spin_node, the graph's shape (`gate_graph.GRAPH_GATES`)
    kind: str = "calls"


@dataclass(frozen=True)
class Finish:
    kind: str = "finish"


def to_json(message: Any) -> dict[str, Any]:
    def convert(value: Any) -> Any:
        if isinstance(value, TensorRef):
            return value.to_json()
        if dataclasses.is_dataclass(value):
            return {f.name: convert(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, dict):
            return {str(k): convert(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [convert(v) for v in value]
        return value

    return convert(message)


# --- solution process -> supervisor ---------------------------------------------------------


@dataclass(frozen=True)
class OutputInfo:
    """What a forward returned: a tensor (its shape, dtype and, when it fit, its bytes)."""

    type_name: str
    shape: tuple[int, ...] = ()
    dtype: str = ""
    ref: TensorRef | None = None


@dataclass(frozen=True)
class Ready:
    pid: int
    sandbox: dict[str, Any]
    kind: ClassVar[str] = "ready"


@dataclass(frozen=True)
class SetupDone:
    class_name: str
    state_dict: dict[str, Any]  # shape -> {missing, wrong_shape, extra_parameters, not_loaded}
    import_flag_changes: list[str]
    tampered: list[str]
    kind: ClassVar[str] = "setup_done"


@dataclass(frozen=True)
class Failed:
    """The solution failed at `stage` (import, construct, run, or a timing request)."""

    stage: str
    error: str
    kind: ClassVar[str] = "failed"


@dataclass(frozen=True)
class CaseDone:
    case: str
    output: OutputInfo
    mutated_inputs: list[int]
    aliases: list[str]
    flag_changes: list[str]
    evidence: dict[str, Any]
    kind: ClassVar[str] = "case_done"


@dataclass(frozen=True)
class TimingReady:
    graphs: bool  # the calls were captured in CUDA graphs
    detail: str  # why not, when they could not be
    evidence: dict[str, Any]  # what the capture dispatched (the ops the graphs replay)
    outputs: list[Any]  # per input set, where its graph's output lies (cuda_ipc.export); [] when eager
    kind: ClassVar[str] = "timing_ready"


@dataclass(frozen=True)
class CallsDone:
    calls: int  # how many calls it served
    own_ms: list[float]  # the solution process's own figure per call (CUDA events or wall): evidence
    evidence: dict[str, Any]
    samples: list[dict[str, Any]]  # the evidence of observed timed calls (rung), each judged as a case's
    kind: ClassVar[str] = "calls_done"


@dataclass(frozen=True)
class Finished:
    tampered: list[str]
    kind: ClassVar[str] = "finished"


Reply = Union[Ready, SetupDone, Failed, CaseDone, TimingReady, CallsDone, Finished]  # noqa: UP007 (runtime alias)
REPLIES: dict[str, type] = {
    cls.kind: cls for cls in (Ready, SetupDone, Failed, CaseDone, TimingReady, CallsDone, Finished)
}
# How each reply field is checked, by its annotation.
_CHECKS: dict[str, Any] = {
    "int": int,
    "bool": bool,
    "str": str,
    "float": float,
    "list[str]": "texts",
    "list[int]": "ints",
    "dict[str, Any]": dict,
    "OutputInfo": "output",
    "list[OutputInfo]": "outputs",
    "list[float]": "floats",
    "list[Any]": "ipc_outputs",
    "list[dict[str, Any]]": list,
}
MAX_TIMED_SAMPLES = 64  # evidence samples of timed calls a `calls_done` may carry
# Nested fields the supervisor reads, checked as deep as it reads them: text -> (kind of value).
_NESTED: dict[str, Any] = {
    "setup_done.state_dict": lambda where, v: _mapping(where, v, lambda w, r: _mapping(w, r, _texts)),
    "case_done.evidence": lambda where, v: _evidence(where, v),
    "calls_done.evidence": lambda where, v: _evidence(where, v),
    "calls_done.samples": lambda where, v: _samples(where, v),
    "timing_ready.evidence": lambda where, v: _evidence(where, v),
}


def parse_reply(message: dict[str, Any]) -> Reply:
    """The typed reply a message from the solution process stands for, every field checked."""
    cls = REPLIES.get(message.get("kind"))  # type: ignore[arg-type]
    if cls is None:
        raise ProtocolError(f"unexpected message kind {str(message.get('kind'))[:40]!r}")
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in message:
            raise ProtocolError(f"{cls.kind} message lacks {f.name!r}")
        values[f.name] = _check(cls.kind, f.name, message[f.name], _CHECKS[str(f.type)])
    return cls(**values)


def _check(kind: str, name: str, value: Any, expected: Any) -> Any:
    where = f"{kind}.{name}"
    if where in _NESTED:
        return _NESTED[where](where, value)
    if expected == "texts":
        return _texts(where, value)
    if expected == "ints":
        if not isinstance(value, list) or len(value) > MAX_LIST or not all(_is_int(v) for v in value):
            raise ProtocolError(f"{where} must be a list of integers")
        return value
    if expected == "floats":
        if not isinstance(value, list) or len(value) > MAX_LIST:
            raise ProtocolError(f"{where} must be a list of at most {MAX_LIST} numbers")
        return [_number(where, v) for v in value]
    if expected == "ipc_outputs":
        return _ipc_outputs(where, value)
    if expected == "output":
        return _output(where, value)
    if expected == "outputs":
        if not isinstance(value, list) or len(value) > MAX_LIST:
            raise ProtocolError(f"{where} must be a list of outputs")
        return [_output(where, v) for v in value]
    if expected is float:
        return _number(where, value)
    if expected is bool and not isinstance(value, bool):
        raise ProtocolError(f"{where} must be true or false")
    if expected is int and (not isinstance(value, int) or isinstance(value, bool)):
        raise ProtocolError(f"{where} must be an integer")
    if expected is str:
        if not isinstance(value, str):
            raise ProtocolError(f"{where} must be text")
        return value[:MAX_TEXT]
    if expected in (list, dict) and not isinstance(value, expected):
        raise ProtocolError(f"{where} must be a {expected.__name__}")
    if expected in (list, dict) and len(str(value)) > 1 << 20:
        raise ProtocolError(f"{where} is too large")
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ints(where: str, value: Any) -> list[int]:
    if not isinstance(value, list) or len(value) > MAX_LIST or not all(_is_int(v) for v in value):
        raise ProtocolError(f"{where} must be a list of integers")
    return [int(v) for v in value]


def _texts(where: str, value: Any) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_LIST or not all(isinstance(v, str) for v in value):
        raise ProtocolError(f"{where} must be a list of text")
    return [v[:MAX_TEXT] for v in value]


def _mapping(where: str, value: Any, check: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or len(value) > MAX_LIST:
        raise ProtocolError(f"{where} must be a mapping")
    return {str(k)[:MAX_TEXT]: check(f"{where}.{k}", v) for k, v in value.items()}


def _pairs(where: str, value: Any, second: Any) -> list[list[Any]]:
    """A list of [text, second(...)] pairs."""
    if not isinstance(value, list) or len(value) > MAX_LIST:
        raise ProtocolError(f"{where} must be a list of pairs")
    out = []
    for item in value:
        if not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str):
            raise ProtocolError(f"{where} must be a list of [name, value] pairs")
        out.append([item[0][:MAX_TEXT], second(where, item[1])])
    return out


def _int(where: str, value: Any) -> int:
    if not _is_int(value):
        raise ProtocolError(f"{where} must hold integers")
    return value


def _samples(where: str, value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or len(value) > MAX_TIMED_SAMPLES:
        raise ProtocolError(f"{where} must be a list of at most {MAX_TIMED_SAMPLES} evidence mappings")
    return [_evidence(f"{where}[{i}]", v) for i, v in enumerate(value)]


def _evidence(where: str, value: Any) -> dict[str, Any]:
    """The kernel evidence of one forward, in the shape `evidence.collect` gives it."""
    if not isinstance(value, dict):
        raise ProtocolError(f"{where} must be a mapping")
    if not value:
        return {}
    ops = _mapping(f"{where}.ops", value.get("ops", {}), lambda w, v: [_number(w, x) for x in _op_entry(w, v)])
    kernels = value.get("device_kernels")
    return {
        "ops": ops,
        "programs": _pairs(f"{where}.programs", value.get("programs", []), _int),
        "failed_launches": _texts(f"{where}.failed_launches", value.get("failed_launches", [])),
        "program_seconds": _number(f"{where}.program_seconds", value.get("program_seconds", 0.0)),
        "forward_seconds": _number(f"{where}.forward_seconds", value.get("forward_seconds", 0.0)),
        "dot_flops": _number(f"{where}.dot_flops", value.get("dot_flops", 0.0)),
        "program_bytes": _number(f"{where}.program_bytes", value.get("program_bytes", 0.0)),
        "evaluator_seconds": _number(f"{where}.evaluator_seconds", value.get("evaluator_seconds", 0.0)),
        "output_foreign": value.get("output_foreign") is True,
        "mutated_inputs": _ints(f"{where}.mutated_inputs", value.get("mutated_inputs", [])),
        "output_aliases": _texts(f"{where}.output_aliases", value.get("output_aliases", [])),
        "aliased_calls": _int(f"{where}.aliased_calls", value.get("aliased_calls", 0)),
        "mutated_calls": _int(f"{where}.mutated_calls", value.get("mutated_calls", 0)),
        "refused_launches": _texts(f"{where}.refused_launches", value.get("refused_launches", [])),
        "overwritten_launches": _texts(f"{where}.overwritten_launches", value.get("overwritten_launches", [])),
        "device_kernels": None if kernels is None else _pairs(f"{where}.device_kernels", kernels, _number),
        "profiler": value.get("profiler") is True,
        "compiled_frames": _int(f"{where}.compiled_frames", value.get("compiled_frames", 0)),
        "calls": max(1, _int(f"{where}.calls", value.get("calls", 1))),
    }


def _op_entry(where: str, value: Any) -> list[Any]:
    if not isinstance(value, list) or len(value) not in (2, 3):
        raise ProtocolError(f"{where} must be [count, seconds] or [count, seconds, bytes]")
    return value


def _number(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ProtocolError(f"{where} must hold finite numbers, got {str(value)[:40]}")
    return float(value)


def _output(where: str, value: Any) -> OutputInfo:
    if not isinstance(value, dict) or not isinstance(value.get("type_name"), str):
        raise ProtocolError(f"{where} must describe an output")
    if value["type_name"] != "Tensor":
        return OutputInfo(value["type_name"][:80])
    shape, dtype = value.get("shape"), value.get("dtype")
    if not isinstance(shape, list) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
        raise ProtocolError(f"{where}.shape must be a list of sizes")
    if not isinstance(dtype, str):
        raise ProtocolError(f"{where}.dtype must be text")
    ref = value.get("ref")
    return OutputInfo("Tensor", tuple(shape), dtype[:40], None if ref is None else TensorRef.from_json(ref))


def _ipc_outputs(where: str, value: Any) -> list[dict[str, Any]]:
    """Per input set, {handle: 64 bytes as hex, offset, nbytes}: where a graph's output lies."""
    if not isinstance(value, list) or len(value) > 4096:
        raise ProtocolError(f"{where} must be a list of at most 4096 output locations")
    out = []
    for item in value:
        if not isinstance(item, dict) or set(item) != {"handle", "offset", "nbytes"}:
            raise ProtocolError(f"{where} entries need exactly handle, offset and nbytes")
        handle, offset, nbytes = item["handle"], item["offset"], item["nbytes"]
        if not isinstance(handle, str) or len(handle) != 128 or any(c not in "0123456789abcdef" for c in handle):
            raise ProtocolError(f"{where}: a CUDA IPC handle is 64 bytes in lower-case hex")
        if not (_is_int(offset) and _is_int(nbytes) and 0 <= offset < 1 << 48 and 0 < nbytes < 1 << 48):
            raise ProtocolError(f"{where}: offset and nbytes must be sizes")
        out.append({"handle": handle, "offset": offset, "nbytes": nbytes})
    return out
