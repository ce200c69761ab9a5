"""The baseline: the reference under eager PyTorch and under torch.compile(mode="reduce-overhead"),
timed exactly as solutions are; the faster one is `baseline_ms` and `baseline_type` says which.

Baselines are cached on disk (one JSON file per key) keyed by the problem file's sha256, the
sizes, the device name, the torch version and the timing method, so evaluating many solutions
neither recompiles nor re-times the reference. Timing runs in a child process (`child_main`).

Failures are cached too (the entry has `failed: true` and the `error`), so a problem whose
reference crashes or times out under timing costs its timeout once, not once per solution.
`get_baseline(..., retry_failed=True)` or `KBV3_RETRY_FAILED_BASELINE=1` times it again.

A CPU baseline (the Triton interpreter's machinery, no performance figure) is keyed by its
environment as well (interpreter prefix, host, CPU count, triton version) and re-timed once it
is older than CPU_MAX_AGE_S, so one noisy figure is never reused across environments or forever.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...paths import cache_root, write_atomically
from .. import mps

# Bump when the timing method changes, so old cache entries are not reused (2: L2 flushed by a
# read; 3: two flush passes; 4: the supervisor's windows, slope over k; 5: the solution's
# stopping rule, at least 8 rounds on CUDA; 6: one call per window, its inputs written and the
# L2 cleared just before it, the median of the per-call times; 7: the gated call, the compiled
# reference called as a user calls it, its input copy included; 8: MPS by default, the mode in
# the key, figures under the gate's floor unresolved).
TIMING_VERSION = 8
CUDA_REGION_BYTES = 12 << 30  # the baseline's timing region, at most
CUDA_SETS = 4  # input sets, as the solution's timing region has
RETRY_FAILED_ENV = "KBV3_RETRY_FAILED_BASELINE"  # "1": re-time baselines whose cached entry is a failure
CPU_MAX_AGE_S = 24 * 3600.0  # a cached CPU baseline older than this is timed again


def cpu_environment() -> str:
    """What a CPU timing depends on beyond the CPU's name: the environment it ran in."""
    import platform
    import sys

    try:
        from importlib.metadata import version

        triton = version("triton")
    except Exception:  # noqa: BLE001 - triton absent or not installed as a distribution
        triton = "none"
    return f"{sys.prefix}|{platform.node()}|{os.cpu_count()}|triton {triton}"


def default_cache_dir() -> Path:
    return cache_root()


def cache_key(problem_sha256: str, sizes: Mapping[str, Any], device_name: str, torch_version: str) -> str:
    blob = json.dumps(
        [problem_sha256, sorted(dict(sizes).items()), device_name, torch_version, TIMING_VERSION], default=str
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def load_cached(cache_dir: Path, key: str) -> dict[str, Any] | None:
    path = Path(cache_dir) / "baselines" / f"{key}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def store_cached(cache_dir: Path, key: str, entry: Mapping[str, Any]) -> None:
    write_atomically(Path(cache_dir) / "baselines" / f"{key}.json", json.dumps(dict(entry)))


def choose(eager_ms: float | None, compiled_ms: float | None) -> tuple[float | None, str | None]:
    """The faster of the two (eager on a tie or when compile failed)."""
    if eager_ms is None:
        return (compiled_ms, "compile") if compiled_ms is not None else (None, None)
    if compiled_ms is not None and compiled_ms < eager_ms:
        return compiled_ms, "compile"
    return eager_ms, "eager"


@contextlib.contextmanager
def timing_lock(path: str | None):
    """Hold an exclusive lock on `path` (when given) so that several baseline processes sharing
    one GPU compile concurrently but never time concurrently."""
    if not path:
        yield
        return
    import fcntl

    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def child_main(spec: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """Time the reference eager and compiled by the method solutions are scored by
    (`time_calls`); compilation (the first calls of the compiled model) happens outside the
    timing lock."""
    import torch

    from ...catalog.materialize import load_module, make_model
    from ..cases import CORRECTNESS, PARAM_SEED, Case, build_inputs, input_precision

    device = spec["device"]
    module = load_module(Path(spec["problem_path"]), spec["sizes"])
    model = make_model(module, device, PARAM_SEED)
    template = build_inputs(module, Case(f"seed{spec['seeds'][0]}", CORRECTNESS, "main", spec["seeds"][0]), device)
    seconds = float(spec.get("timing_seconds", 10.0))

    lock = spec.get("timing_lock")
    with torch.no_grad(), timing_lock(lock):
        result: dict[str, Any] = {
            "eager": time_calls(model, module, template, device, seconds),
            "precision": input_precision(template),
        }
    if spec.get("compile", True):
        try:
            result["compiled"] = _time_compiled(model, module, template, device, seconds, lock)
        except Exception as exc:  # compile failures leave eager as the baseline
            result["compile_error"] = f"{type(exc).__name__}: {exc}"[:500]
    return result


def _time_compiled(model: Any, module: Any, template: list[Any], device: str, seconds: float, lock: Any) -> dict:
    """torch.compile(mode="reduce-overhead"), called as a user calls it: each call copies its new
    inputs into the compiled graphs' static buffers and replays them, and that copy is part of
    its time, as in the seed's harness and the published runs."""
    import torch

    compiled = torch.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(3):  # compile and record the CUDA graphs before timing
            compiled(*template)
        with timing_lock(lock):
            timed = time_calls(compiled, module, template, device, seconds, gate=False)
    return {**timed, "compile_mode": "reduce-overhead, called as a user calls it"}


def time_calls(
    fn: Any, module: Any, template: list[Any], device: str, seconds: float, gate: bool = True
) -> dict[str, Any]:
    """The reference's per-call time by `timing.measure`, the method solutions are timed by: one
    call at a time on new inputs written just before it, the L2 cleared, the echo's window
    subtracted, under the solutions' stopping rule. On CUDA the call sits behind the gate
    (`timing.local.GatedLocal`): its GPU work alone is in the window, whatever host work it does.
    A reference that synchronises the host, and with `gate=False` (the compiled reference, whose
    graph trees never answered a gate), is timed by events behind the flush and a device sleep
    that hides its host work: its GPU work alone again, the record says which (`method`)."""
    import random

    import torch

    from ..cases import single_output
    from ..protocol.gate import Driver, GateUnavailable
    from .timing.device_work import DeviceWork
    from .timing.local import EventLocal, GatedLocal, HostLocal, gateable
    from .timing.measure import Feed, measure
    from .timing.memory import TimedMemory, fresh_inputs, set_bytes
    from .timing.stats import CallPlan, summarize

    plan = CallPlan.for_device(device, seconds)
    out = single_output(fn(*template))
    out_nbytes = out.numel() * out.element_size()
    per_set = set_bytes(template, out_nbytes)
    count = int(max(1, min(CUDA_SETS if device == "cuda" else 2, CUDA_REGION_BYTES // per_set)))
    memory = TimedMemory(
        torch.empty(count * per_set, dtype=torch.uint8, device=device), template, out.shape, out.dtype, count
    )
    decoy = TimedMemory(torch.empty(per_set, dtype=torch.uint8, device=device), template, out.shape, out.dtype, 1)
    work = DeviceWork(device, out_nbytes)
    rng = random.Random()
    feed = Feed(
        count, lambda: fresh_inputs(module, device, rng.getrandbits(62)), memory.write, lambda x: decoy.write(0, x)
    )

    def call(s: int) -> Any:
        return fn(*memory.sets[s])

    def echo(s: int) -> Any:
        work.echo_graph.replay()

    started = time.perf_counter()
    method, why = "cpu", ""
    if device != "cuda":
        calls = measure(HostLocal(call), HostLocal(lambda s: None), feed, work, plan, rng, subtract_echo=False)
    else:
        method = "gated"
        try:
            if not gate:
                raise GateUnavailable("timed by events behind a device sleep (CUDA-graph trees behind a gate hang)")
            if not gateable(call):
                raise GateUnavailable("the reference synchronises the host (torch's sync debug mode)")
            driver = Driver()
            calls = measure(GatedLocal(call, driver), GatedLocal(echo, driver), feed, work, plan, rng)
        except GateUnavailable as exc:
            torch.cuda.synchronize()
            method, why = "events", str(exc)
            calls = measure(EventLocal(call), EventLocal(echo), feed, work, plan, rng)
    summary = summarize(calls.nets)
    return {
        "method": method,
        "median_ms": summary.median_s * 1e3,
        "calls": summary.to_dict(),
        "not_gated_because": why,
        "mps": device == "cuda" and mps.in_use(),
        "echo_window_ms": summarize(calls.echo_windows).median_s * 1e3,
        "echo_call_ms": work.echo_call_s * 1e3,
        "calls_s": round(time.perf_counter() - started, 3),
    }


def baseline_entry(result: Mapping[str, Any]) -> dict[str, Any]:
    eager = (result.get("eager") or {}).get("median_ms")
    compiled = (result.get("compiled") or {}).get("median_ms")
    baseline_ms, baseline_type = choose(eager, compiled)
    return {
        "eager_ms": eager,
        "compiled_ms": compiled,
        "baseline_ms": baseline_ms,
        "baseline_type": baseline_type,
        "compile_error": result.get("compile_error"),
        "eager": result.get("eager"),
        "compiled": result.get("compiled"),
        "precision": result.get("precision"),
    }


def retry_failed_from_env() -> bool:
    return os.environ.get(RETRY_FAILED_ENV, "").strip().lower() in ("1", "true", "yes")


def get_baseline(
    spec: Mapping[str, Any],
    *,
    problem_sha256: str,
    device_name: str,
    cache_dir: Path | None,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    retry_failed: bool = False,
) -> dict[str, Any]:
    """The baseline for `spec` (device, problem_path, sizes, seeds): from the cache, or timed in a
    child and cached. Returns baseline_entry()'s dict plus `cached`; a failure (cached or new) is
    `{"failed": True, "error": ..., "cached": ...}`. A cached failure is reused unless
    `retry_failed` (or the KBV3_RETRY_FAILED_BASELINE environment variable) asks to re-time."""
    import torch

    from .isolate import run_child

    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    on_cpu = spec.get("device") == "cpu"
    key = cache_key(
        problem_sha256,
        spec["sizes"],
        device_name
        + ("" if spec.get("compile", True) else ":eager-only")
        + (f"|{cpu_environment()}" if on_cpu else "")
        + ("|mps" if not on_cpu and mps.in_use() else ""),  # each mode's figures apart
        torch.__version__,
    )
    hit = load_cached(cache, key)
    if hit is not None and on_cpu and not time.time() - float(hit.get("stored_at") or 0) < CPU_MAX_AGE_S:
        hit = None  # a CPU figure is re-timed rather than kept forever
    if hit is not None and not (hit.get("failed") and (retry_failed or retry_failed_from_env())):
        return {**hit, "cached": True}
    with tempfile.TemporaryDirectory(prefix="kbv3-baseline-") as tmp:
        outcome = run_child("baseline", Path(tmp), dict(spec), timeout_s=timeout_s, env=env)
    result = outcome.result
    if result is None or not result.get("ok"):
        reason = outcome.reason or (result or {}).get("error", "unknown error")
        failure = {
            "failed": True,
            "error": f"baseline failed: {reason}",
            "log_tail": outcome.log_tail[-2000:],
            "key": key,
            "device_name": device_name,
            "torch": torch.__version__,
            "stored_at": time.time(),
        }
        store_cached(cache, key, failure)
        return {**failure, "cached": False}
    entry = baseline_entry(result)
    entry.update(key=key, device_name=device_name, torch=torch.__version__, stored_at=time.time())
    store_cached(cache, key, entry)
    return {**entry, "cached": False}
