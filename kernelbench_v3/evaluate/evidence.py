"""Collecting kernel evidence while a forward runs: which aten ops were dispatched, which Triton
interpreter programs ran (`program_counter`), which device kernels the profiler saw, where the
output's bytes came from (`provenance`) and whether the output is one of the inputs.

Collectors only: judging the evidence is `kernels`' and the kernel rule's job. In the solution
process everything collected here is evidence the supervisor checks, never a verdict. The
supervisor also uses `OpRecorder` on the reference, to know which compute ops are the problem's
main work. The evaluator's own bookkeeping (provenance around ops) is timed apart
(`evaluator_seconds`), so it is never charged to the solution as work outside its programs.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..hardware.roofline import iter_tensors
from .program_counter import ProgramLog, install_program_counter
from .provenance import Provenance, Sources, byte_span

__all__ = ["OpRecorder", "ProgramLog", "Provenance", "Sources", "byte_span", "collect", "install_program_counter"]


def _tensor_bytes(values: Any) -> int:
    """Bytes of the tensors among `values`."""
    return sum(t.numel() * t.element_size() for t in iter_tensors(values))


class OpRecorder(TorchDispatchMode):
    """Every aten op dispatched inside the `with` block: its count, its exclusive host time and
    the bytes of the tensors it read and wrote (its arguments and its results)."""

    def __init__(self, provenance: Provenance | None = None) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}
        self.seconds: dict[str, float] = {}
        self.bytes: dict[str, int] = {}
        self.provenance = provenance
        self.overhead = 0.0  # seconds of provenance bookkeeping outside launches
        self.last_copy: tuple[Any, Any] | None = None  # (destination, source) of the latest copy_

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        name = func.overloadpacket.__name__
        provenance = self.provenance
        outer = provenance is not None and provenance.depth == 0  # not an op a launch runs
        if outer:
            began = time.perf_counter()
            provenance.enter()
            self.overhead += time.perf_counter() - began
        started = time.perf_counter()
        result = None
        try:
            result = func(*args, **(kwargs or {}))
            return result
        finally:
            ended = time.perf_counter()
            self.counts[name] = self.counts.get(name, 0) + 1
            self.seconds[name] = self.seconds.get(name, 0.0) + ended - started
            moved = _tensor_bytes(args) + _tensor_bytes(kwargs or {}) + _tensor_bytes(result)
            self.bytes[name] = self.bytes.get(name, 0) + moved
            if name == "copy_" and len(args) > 1:
                self.last_copy = (args[0], args[1])
            if outer:  # inside a launch only the programs' stores count
                provenance.after_op(name, args, kwargs or {}, result)
                provenance.leave()
                self.overhead += time.perf_counter() - ended

    def summary(self) -> dict[str, list[float]]:
        """op name -> [count, seconds, bytes]."""
        return {name: [self.counts[name], self.seconds[name], self.bytes[name]] for name in self.counts}


def profile_device(fn: Any) -> tuple[Any, list[list[Any]] | None]:
    """Run `fn()` under the CUDA profiler: its result and [name, device microseconds] per kernel
    name (None when the profiler is unavailable; then `fn` still ran, unprofiled)."""
    from .kernels import profile_cuda

    result, times = profile_cuda(fn)
    return result, None if times is None else [[name, us] for name, us in times]


def dynamo_frames() -> int:
    """How many frames torch.compile has compiled so far in this process."""
    try:
        from torch._dynamo.utils import counters
    except Exception:
        return 0
    return int(sum(counters["frames"].values())) if "frames" in counters else 0


def _aliased_inputs(result: Any, recorder: OpRecorder, inputs: list[Any]) -> list[str]:
    """Inputs whose bytes the forward's output overlaps. A timed call returns the slot its output
    was copied into (`timed_calls`): then the forward's own output is that last copy's source."""
    if not isinstance(result, torch.Tensor):
        return []
    outputs = [result]
    last = recorder.last_copy
    if last is not None and last[0] is result:
        outputs.append(last[1])
    found = []
    for out in outputs:
        lo, hi = byte_span(out)
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and hi > lo:
                a, b = byte_span(x)
                if a < hi and lo < b and f"input {i}" not in found:
                    found.append(f"input {i}")
    return found


def collect(
    fn: Any, device: str, programs: ProgramLog, profile: bool = True, sources: Sources | None = None
) -> tuple[Any, dict[str, Any]]:
    """Run `fn()` once with the collectors on (the CUDA profiler only when `profile`: it is slow
    to start); returns its result and the evidence. On CPU, with `sources` (what the forward may
    start from: its inputs, the model's and the module's tensors), the provenance of its output
    is traced too (`output_foreign`), and so are inputs it changed and an output that is one of
    them (`mutated_inputs`, `output_aliases`)."""
    provenance = None
    if device == "cpu" and sources is not None:
        provenance = Provenance()
        provenance.seed(sources)
    recorder = OpRecorder(provenance)
    programs.reset()
    programs.provenance = provenance
    programs.owner = threading.get_ident()
    programs.recording = True
    started = time.perf_counter()
    try:
        with recorder:
            if device == "cuda" and profile:
                result, kernels = profile_device(fn)
            else:
                result, kernels = fn(), None
    finally:
        programs.recording = False
        programs.provenance = None
        forward_s = time.perf_counter() - started
    output_foreign, mutated, aliases = None, [], []
    if provenance is not None:
        provenance.enter()  # the forward's end: what changed since the last op or launch was written unseen
        if isinstance(result, torch.Tensor):
            output_foreign = provenance.foreign_values(result)
        mutated = provenance.mutated_inputs()
        aliases = _aliased_inputs(result, recorder, sources.inputs)
        if aliases:
            programs.aliased_calls += 1
        if mutated:
            programs.mutated_calls += 1
    evidence = {
        "ops": recorder.summary(),
        "programs": [[name, n] for name, n in programs.launches],
        "failed_launches": list(programs.failed),
        "program_seconds": programs.seconds,
        "evaluator_seconds": recorder.overhead,
        "dot_flops": programs.dot_flops,
        "program_bytes": programs.bytes_moved,
        "output_foreign": output_foreign,
        "mutated_inputs": mutated,
        "output_aliases": aliases,
        # For the life of the process: calls that returned or changed an input, launches refused for
        # what their bodies reach, launches whose memory something else wrote while they ran.
        "aliased_calls": programs.aliased_calls,
        "mutated_calls": programs.mutated_calls,
        "refused_launches": list(programs.refused),
        "overwritten_launches": programs.overwritten[:20],
        "forward_seconds": forward_s,
        "device_kernels": kernels,
        "profiler": device != "cuda" or kernels is not None,  # on CUDA: the device kernels were seen
        # The solution process is fresh and the evaluator compiles nothing in it, so any frame
        # torch.compile compiled so far is the solution's (compiled code that already ran
        # dispatches no aten ops, so this is how a compiled forward shows).
        "compiled_frames": dynamo_frames(),
    }
    return result, evidence
