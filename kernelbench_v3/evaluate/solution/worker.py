"""The solution process: imports one solution, runs what the supervisor asks, reports evidence.

It is forked fresh for each solution (by `zygote`), enters the sandbox before the solution is
imported, and holds no secret: it never sees an expected output, the verification picks or the
weights of inputs it has not been sent yet. It answers one request at a time (`messages`):
`setup` (import, construct, load the state dict), `run_case`, `prepare_timing`, `capture`,
`calls` (one-call windows through the doorbell) and `finish`. Everything it sends back - outputs, timings, kernels, tampering it noticed - is
evidence that the supervisor checks; nothing here decides a verdict.
"""

from __future__ import annotations

import os
import time
from collections import deque
from typing import Any

import torch

from ..cases import PARAM_SEED, single_output
from ..evidence import ProgramLog, collect, install_program_counter
from ..protocol.channel import Arena, Link, PeerGone, TensorRef
from ..protocol.doorbell import ARMED, DONE, GO, SET, STOP_SET, WAKE, Doorbell
from ..protocol.doorbell import NBYTES as DOORBELL_BYTES
from ..timed_calls import TimedCalls, resolve, view
from . import guard, seccomp
from .forward_facts import SolutionFailed, aliases, as_init_arg, check_state_dict, copy_args, describe, same
from .forward_facts import error_text as _error_text
from .forward_facts import keep_sample as _keep_sample
from .forward_facts import sources as _sources

HELD_OUTPUTS = 8  # a new output may not share memory with any of the last this-many outputs
CALL_WAIT_S = 3600.0  # the supervisor rings or kills; this only bounds a supervisor that vanished
CPU_SPIN_S, CPU_SLEEP_S = 0.0005, 0.0001  # CPU hosts may be oversubscribed: poll politely
MAX_OWN = 4096  # per-call figures reported


class Worker:
    def __init__(self, link: Link, arena: Arena, device: str):
        self.link, self.arena, self.device = link, arena, device
        self.models: dict[str, torch.nn.Module] = {}
        self.inputs: dict[str, list[Any]] = {}
        self.held: deque[torch.Tensor] = deque(maxlen=HELD_OUTPUTS)
        self.programs = ProgramLog()
        install_program_counter(self.programs)
        guard.settle_lazy_torch_patches()
        self.flags = guard.read_flags()
        self.namespaces = guard.snapshot_namespaces()
        self.region: torch.Tensor | None = None
        self.calls: TimedCalls | None = None
        self.bell: Doorbell | None = None
        self.gate: Any = None  # the doorbell's gate words, once registered (`_open_gate`)
        self.driver: Any = None
        self.gated_graphs: dict[int, int | None] = {}  # set -> its graph behind a spin node (`_gated_graph`)
        self.stream: Any = None
        self.bell_address = 0
        self.solution: Any = None  # the imported solution module

    # --- requests ---------------------------------------------------------------------------

    def setup(self, msg: dict[str, Any]) -> dict[str, Any]:
        from ...catalog.materialize import import_file, seed_everything

        if self.device == "cuda":
            torch.cuda.set_per_process_memory_fraction(float(msg["memory_fraction"]))
        rng = guard.save_rng()
        try:
            module = import_file(msg["solution_path"], "kbv3_solution")
            self.solution = module
        except BaseException as exc:  # SystemExit and KeyboardInterrupt included
            raise SolutionFailed("import", _error_text(exc)) from None
        import_changes = guard.restore_flags(self.flags)
        guard.restore_rng(rng)
        tampered = guard.tampered(self.namespaces)
        cls = next(
            (
                c
                for c in (getattr(module, n, None) for n in ("ModelNew", "Model"))
                if isinstance(c, type) and issubclass(c, torch.nn.Module)
            ),
            None,
        )
        if cls is None:
            raise SolutionFailed(
                "import", "the solution defines neither `Model` nor `ModelNew` (an nn.Module subclass)"
            )
        reports = {}
        for name, shape in msg["shapes"].items():
            state = {
                k: _own_copy(self.arena.view(TensorRef.from_json(ref)), self.device)
                for k, ref in shape["state"].items()
            }
            try:
                seed_everything(PARAM_SEED)
                model = cls(*[as_init_arg(a) for a in shape["init_args"]]).to(self.device).eval()
                reports[name] = check_state_dict(model, state)
            except BaseException as exc:
                raise SolutionFailed("construct", _error_text(exc)) from None
            self.models[name] = model
        return {
            "kind": "setup_done",
            "class_name": cls.__name__,
            "state_dict": reports,
            "import_flag_changes": import_changes,
            "tampered": tampered,
        }

    def run_case(self, msg: dict[str, Any]) -> dict[str, Any]:
        args = copy_args(self.arena, msg["args"], self.device)
        reuse = msg.get("reuse_buffers_of")
        if reuse:  # same buffers as that case, new values: outputs must follow the values
            buffers = self.inputs[reuse]
            self.inputs[reuse] = [x.clone() if isinstance(x, torch.Tensor) else x for x in buffers]
            with torch.no_grad():
                for dst, src in zip(buffers, args):
                    if isinstance(dst, torch.Tensor):
                        dst.copy_(src)
            args = buffers
        self.inputs[msg["case"]] = args
        originals = [x.clone() if isinstance(x, torch.Tensor) else x for x in args]
        model = self.models[msg["shape"]]
        ev: dict[str, Any] = {}
        try:
            with torch.no_grad():  # every case is observed; the profiler runs on the sampled ones
                out, ev = collect(
                    lambda: model(*args),
                    self.device,
                    self.programs,
                    bool(msg.get("evidence")),
                    sources=_sources(args, model, self.solution),
                )
            if self.device == "cuda":
                torch.cuda.synchronize()
        except BaseException as exc:
            raise SolutionFailed("run", f"case {msg['case']}: " + _error_text(exc)) from None
        reply: dict[str, Any] = {
            "kind": "case_done",
            "case": msg["case"],
            "flag_changes": guard.restore_flags(self.flags),
            "mutated_inputs": [
                i for i, (x, o) in enumerate(zip(args, originals)) if isinstance(x, torch.Tensor) and not same(x, o)
            ],
            "aliases": [],
            "evidence": ev,
        }
        out = single_output(out)
        if isinstance(out, torch.Tensor):
            named = {f"input {i}": x for i, x in enumerate(args) if isinstance(x, torch.Tensor)}
            named.update({f"parameter {k}": p for k, p in model.named_parameters()})
            named.update({f"buffer {k}": b for k, b in model.named_buffers()})
            named.update({f"the output of the call {len(self.held) - j} before": t for j, t in enumerate(self.held)})
            reply["aliases"] = aliases(out, named)
            self.held.append(out)
        reply["output"] = describe(self.arena, out, msg["slot"])
        return reply

    def prepare_timing(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Map the supervisor's timing region and its layout; the model runs every timed call
        from it, and the doorbell at `msg["doorbell"]` in the arena opens each call."""
        region = msg["region"]
        if "cuda_ipc" in region:
            from ..protocol.cuda_ipc import open_shared

            self.region = open_shared(region["cuda_ipc"])
        else:
            offset, nbytes = (int(v) for v in region["arena"])
            self.region = self.arena.view(TensorRef(offset, (nbytes,), "uint8"))
        block = self.arena.view(TensorRef(int(msg["doorbell"]), (DOORBELL_BYTES,), "uint8"))
        self.bell, self.bell_address = Doorbell(block), block.data_ptr()
        layout = msg["layout"]
        model = self.models["main"]
        sets = [resolve(self.region, args) for args in layout["sets"]]
        slots = [view(self.region, ref) for ref in layout["slots"]]
        self.calls = TimedCalls(lambda *args: model(*args), sets, slots)
        return {"kind": "timing_ready", "graphs": False, "detail": "", "evidence": {}, "outputs": []}

    def capture(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Capture a graph per input set and export where each graph's output lies."""
        assert self.calls is not None, "prepare_timing comes first"
        ev: dict[str, Any] = {}
        ok, outputs, detail = False, [], "no CUDA graphs on the CPU"
        if self.device == "cuda":  # what is captured is what the calls replay: observed as it is captured
            with torch.no_grad():
                keep = bool(msg.get("keep_graphs"))
                ok, ev = collect(lambda: self.calls.capture(keep), self.device, self.programs, False)
            detail = self.calls.graph_error
            if ok:
                from ..protocol.cuda_ipc import export

                try:
                    outputs = [export(out) for out in self.calls.outputs]
                except Exception as exc:  # noqa: BLE001 - not exportable: run eagerly, copying
                    self.calls.graphs, self.calls.outputs, ok, outputs = [], [], False, []
                    detail = f"the graphs' outputs cannot be shared: {type(exc).__name__}: {exc}"[:300]
        return {
            "kind": "timing_ready",
            "graphs": bool(ok),
            "detail": "" if ok else detail,
            "evidence": ev,
            "outputs": outputs,
        }

    def calls_(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Serve one-call windows through the doorbell until the supervisor names STOP_SET.

        Gated (a captured graph, `msg["gated"]`): arming enqueues wait(GO >= seq) (the spin kernel
        if `msg["spin"]`) -> the set's graph -> write(DONE = seq) on one stream and says ARMED; the GPU runs the call when the
        supervisor opens the gate, and this process is stopped meanwhile. The echo asked for
        `msg["fused_echo"]` arms the fused echo kernel alone (GO read, DONE written, no graph);
        with `msg["spin_node"]` the spin is the first node of a graph around the set's graph; with
        `msg["held"]` (the occupancy gate, `protocol.hold`) the call is behind the stream's wait,
        which the timer opens before GO once the inputs are written, while its HOLD owns every
        SM until GO, and the echo's call is the held echo (DONE the moment it runs). Rung:
        arming says ARMED, then the call runs on the host's GO, is synchronised and answers DONE."""
        assert self.calls is not None and self.bell is not None, "prepare_timing comes first"
        bell, calls, cuda = self.bell, self.calls, self.device == "cuda"
        gated = bool(msg.get("gated")) and cuda and bool(calls.graphs)
        spin_gate = gated and bool(msg.get("spin"))
        fused_echo = gated and bool(msg.get("fused_echo"))
        spin_node = gated and bool(msg.get("spin_node"))
        shape = str(msg.get("graph_gate") or "node")
        held = gated and bool(msg.get("held"))
        if gated:
            self._open_gate()
        observe = not gated and (bool(msg.get("evidence")) or not calls.graphs)  # eager calls: observed
        spin = {"spin_s": float("inf")} if cuda else {"spin_s": CPU_SPIN_S, "sleep_s": CPU_SLEEP_S}
        seq, own_ms, ev, samples, served = int(msg["first"]), [], {}, [], 0
        with torch.no_grad():
            while True:
                bell.wait(WAKE, seq, CALL_WAIT_S, **spin)
                s = bell.read(SET)
                if s == STOP_SET:
                    break
                if not 0 <= s < len(calls.sets):
                    raise SolutionFailed("timing", f"the supervisor named input set {s}")  # never: trusted
                if fused_echo:
                    self.gate.enqueue_echo(self.driver, self.stream, seq, held=held)
                elif spin_node:
                    self._enqueue_graph_gated(seq, s, shape)
                elif gated:
                    self.gate.enqueue(self.driver, self.stream, seq, calls.graphs[s].replay, spin=spin_gate)
                if gated:
                    bell.write(ARMED, seq)
                    seq += 1
                    continue
                bell.write(ARMED, seq)
                bell.wait(GO, seq, CALL_WAIT_S, **spin)
                began = time.perf_counter()
                if observe:
                    sources = _sources(calls.sets[s], self.models["main"], self.solution)
                    _, ev = collect(
                        lambda s=s: calls.run(s), self.device, self.programs, bool(msg.get("evidence")), sources
                    )
                    _keep_sample(samples, ev, served)
                else:
                    calls.run(s)
                if cuda:
                    torch.cuda.current_stream().synchronize()
                own_ms.append((time.perf_counter() - began) * 1e3)
                bell.write(DONE, seq)
                seq, served = seq + 1, served + 1
        if ev:
            ev["calls"] = 1
        return {
            "kind": "calls_done",
            "calls": len(own_ms),
            "own_ms": own_ms[:MAX_OWN],
            "evidence": ev,
            "samples": samples,
        }

    def _enqueue_graph_gated(self, seq: int, s: int, shape: str) -> None:
        """Call `seq` on set `s` under the graph gate `shape`; behind the spin kernel where the
        driver could not build the gated graph (`_gated_graph`): the call is held either way."""
        from ..protocol.gate_graph import GRAPH_GATES

        graph = self._gated_graph(s, shape)
        if graph is None:
            self.gate.enqueue(self.driver, self.stream, seq, self.calls.graphs[s].replay, spin=True)
        else:
            self.gate.enqueue_gated_graph(self.driver, self.stream, seq, graph, GRAPH_GATES[shape].done_in_graph)

    def _gated_graph(self, s: int, shape: str) -> int | None:
        """Set `s`'s graph behind a spin node of the gate's, shaped as `shape` says
        (`protocol.gate_graph.GRAPH_GATES`; built once, on its first arming); None where the
        driver refused to build it (a node it cannot clone or join, an older GPU)."""
        from ..protocol.gate import GateUnavailable
        from ..protocol.gate_graph import GRAPH_GATES

        if shape not in GRAPH_GATES:
            raise SolutionFailed("timing", f"the supervisor named graph gate {shape!r}")  # never: trusted
        if s not in self.gated_graphs:
            child, gate = self.calls.graphs[s].raw_cuda_graph(), self.gate
            try:
                self.gated_graphs[s] = self.driver.gated_graph(
                    child, gate.go_device, gate.target_device, kind=shape, done=gate.done_device
                )
            except GateUnavailable:
                self.gated_graphs[s] = None
        return self.gated_graphs[s]

    def _open_gate(self) -> None:
        """Register the doorbell's block with this process's CUDA context (once)."""
        if self.gate is None:
            from ..protocol.gate import Driver

            self.driver, self.stream = Driver(), torch.cuda.Stream()
            gate = self.bell.gate_words()
            gate.register(self.driver, self.bell_address)
            self.gate = gate

    def finish(self, msg: dict[str, Any]) -> dict[str, Any]:
        return {"kind": "finished", "tampered": guard.tampered(self.namespaces)}


HANDLERS = {
    "setup": Worker.setup,
    "run_case": Worker.run_case,
    "prepare_timing": Worker.prepare_timing,
    "capture": Worker.capture,
    "calls": Worker.calls_,
    "finish": Worker.finish,
}


def serve(link: Link, arena_fd: int, arena_size: int, device: str) -> None:
    """Answer the supervisor's requests until `finish` or a broken channel; never returns."""
    code = 0
    try:
        try:
            worker = Worker(link, Arena(arena_fd, arena_size), device)
        except BaseException as exc:  # say why to the first request, never a silent exit
            link.receive()
            link.send(
                {
                    "kind": "failed",
                    "stage": "worker",
                    "error": "the evaluator's worker could not start: " + _error_text(exc),
                }
            )
            code = 2
            return
        while True:
            msg = link.receive()
            if msg.get("kind") == "prepare_timing" and device == "cpu":
                # From here on nothing of the solution's may start a process: one would work
                # beside the timed process, in the arming gap or a window (`seccomp`). Where the
                # filter cannot be installed, the pause's walk still fails any new process.
                seccomp.forbid_forks()
            try:
                reply = HANDLERS[msg["kind"]](worker, msg)
            except SolutionFailed as failed:
                link.send({"kind": "failed", "stage": failed.stage, "error": str(failed)})
                continue
            except BaseException as exc:  # the solution broke something the evaluator needs
                link.send({"kind": "failed", "stage": msg["kind"], "error": _error_text(exc)})
                continue
            link.send(reply)
            if msg["kind"] == "finish":
                break
    except PeerGone:
        code = 1
    finally:
        os._exit(code)


def wait_for_device(device: str) -> float:
    """Open the CUDA context now (it is slow), so the first request is not charged for it."""
    started = time.monotonic()
    if device == "cuda":
        torch.zeros(1, device="cuda").sum().item()
    return time.monotonic() - started


def _own_copy(view: torch.Tensor, device: str) -> torch.Tensor:
    """A copy of a reference tensor in the arena, on `device`: loading it into the model and
    checking that it stuck then never cross the bus again (level4/5's 5.6 GB of experts went
    over it twice more, with a host copy besides, in its 17 s `solution_setup` on an H100)."""
    return view.clone() if device == "cpu" else view.to(device)
