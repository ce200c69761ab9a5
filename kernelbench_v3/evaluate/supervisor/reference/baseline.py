"""The baseline: the reference under eager PyTorch and under torch.compile(mode="reduce-overhead"),
timed exactly as solutions are; the faster one is `baseline_ms` and `baseline_type` says which.

Baselines are cached on disk (one JSON file per key) keyed by the problem file's sha256, the
sizes, the device name, the torch version and the timing method, so evaluating many solutions
neither recompiles nor re-times the reference. Timing runs in a child process (`child_main`).

Failures are cached too (the entry has `failed: true` and the `error`), so a problem whose
reference crashes or times out under timing costs its timeout once, not once per solution; but
not running out of device memory, which depends on what else held it (on an H100 level3/31's
compiled reference met 53 GB another worker kept, and the failure stood for every later run).
`get_baseline(..., retry_failed=True)` or `KBV3_RETRY_FAILED_BASELINE=1` times it again.

A CPU baseline (the Triton interpreter's machinery, no performance figure) is keyed by its
environment as well (interpreter prefix, host, CPU count, triton version) and re-timed once it
is older than CPU_MAX_AGE_S, so one noisy figure is never reused across environments or forever.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ....paths import cache_root, write_atomically
from ... import fingerprint, mps
from ...protocol.gate import echo_kind, gate_kind
from ...protocol.gate_graph import GRAPH_GATES
from ...record import ran_out_of_memory
from ...request import DEFAULT_TIMEOUT_S, EvalRequest
from .baseline_child import child_steps

# Bump when the timing method changes, so old cache entries are not reused (2: L2 flushed by a
# read; 3: two flush passes; 4: the supervisor's windows, slope over k; 5: the solution's
# stopping rule, at least 8 rounds on CUDA; 6: one call per window, its inputs written and the
# L2 cleared just before it, the median of the per-call times; 7: the gated call, the compiled
# reference called as a user calls it, its input copy included; 8: MPS by default, the mode in
# the key, figures under the gate's floor unresolved; 9: the gate's kind, wait or spin, in the
# key; 10: the fused echo under MPS, the spin by default, the echo's kind in the key; 11: under
# MPS the call held inside its own graph, `gate.default_gate`). Stopping at 0.5% after 20 calls
# (issue 42) changes how precisely a median is known, not what it estimates: no bump.
TIMING_VERSION = 11
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


def _gpu_mode() -> str:
    """The part of a GPU baseline's key that its timing mode decides: MPS or not, the gate, the echo."""
    under_mps = mps.in_use()
    return ("|mps" if under_mps else "") + f"|gate-{gate_kind(under_mps)}|echo-{echo_kind(under_mps)}"


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


@dataclass(frozen=True)
class BaselineJob:
    """One baseline to get: the child's spec (device, problem_path, sizes, seeds), the cache key
    and folder its entry is filed under, and the child's limit and environment."""

    spec: dict[str, Any]
    key: str
    cache: Path
    device_name: str
    timeout_s: float
    env: dict[str, str] | None = None
    retry_failed: bool = False

    @property
    def on_cpu(self) -> bool:
        return self.spec.get("device") == "cpu"


def baseline_job(
    spec: Mapping[str, Any],
    *,
    problem_sha256: str,
    device_name: str,
    cache_dir: Path | None,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    retry_failed: bool = False,
) -> BaselineJob:
    """The job of `get_baseline`'s arguments: its cache key worked out, nothing read or run."""
    import torch

    on_cpu = spec.get("device") == "cpu"
    key = cache_key(
        problem_sha256,
        spec["sizes"],
        device_name
        + ("" if spec.get("compile", True) else ":eager-only")
        + (f"|{cpu_environment()}" if on_cpu else "")
        + ("" if on_cpu else _gpu_mode()),  # each mode's figures apart
        torch.__version__,
    )
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return BaselineJob(dict(spec), key, cache, device_name, timeout_s, dict(env) if env else None, retry_failed)


def cached_baseline(job: BaselineJob) -> dict[str, Any] | None:
    """The cache's entry for `job` with `cached: True`, or None when it is to be timed: none, a
    CPU figure too old, a failure for want of device memory, or a failure that `retry_failed` (or
    KBV3_RETRY_FAILED_BASELINE) re-times."""
    hit = load_cached(job.cache, job.key)
    if hit is not None and job.on_cpu and not time.time() - float(hit.get("stored_at") or 0) < CPU_MAX_AGE_S:
        hit = None  # a CPU figure is re-timed rather than kept forever
    if hit is not None and hit.get("failed") and ran_out_of_memory(str(hit.get("error") or "")):
        hit = None  # cached before such failures were not: what else held the memory decided it
    if hit is not None and not (hit.get("failed") and (job.retry_failed or retry_failed_from_env())):
        return {**hit, "cached": True}
    return None


def settle(job: BaselineJob, outcome: Any) -> dict[str, Any]:
    """The baseline a child's outcome (`isolate.ChildOutcome`) gives, cached under `job.key`:
    baseline_entry()'s dict plus `cached: False` and the child's seconds per step (`steps_s`,
    never cached), or a failure, cached too. A child its caller stopped is no failure of the
    reference's: reported, never cached."""
    import torch

    result = outcome.result
    if result is None or not result.get("ok"):
        reason = outcome.reason or (result or {}).get("error", "unknown error")
        failure = {
            "failed": True,
            "error": f"baseline failed: {reason}",
            "log_tail": outcome.log_tail[-2000:],
            "key": job.key,
            "device_name": job.device_name,
            "torch": torch.__version__,
            "stored_at": time.time(),
        }
        if outcome.stopped:
            return {**failure, "cached": False}
        if ran_out_of_memory(reason):
            return {**failure, "cached": False, "not_cached_because": "out of device memory: what else held it decides"}
        store_cached(job.cache, job.key, failure)
        return {**failure, "cached": False}
    entry = baseline_entry(result)
    entry.update(key=job.key, device_name=job.device_name, torch=torch.__version__, stored_at=time.time())
    steps = child_steps(outcome)  # this timing's own seconds: returned, never cached
    mismatch = "" if job.on_cpu else _timed_otherwise(entry)
    if mismatch:  # a figure filed under a mode it was not timed in would be served to that mode
        return {**entry, "cached": False, "not_cached_because": mismatch, "steps_s": steps}
    store_cached(job.cache, job.key, entry)
    return {**entry, "cached": False, "steps_s": steps}


def get_baseline(spec: Mapping[str, Any], **job: Any) -> dict[str, Any]:
    """The baseline for `spec` (device, problem_path, sizes, seeds; the other arguments are
    `baseline_job`'s): from the cache, or timed in a child and cached. Returns baseline_entry()'s
    dict plus `cached` (and, timed now, the child's seconds per step, `steps_s`: `child_steps`);
    a failure (cached or new) is `{"failed": True, "error": ..., "cached": ...}`. A cached
    failure is reused unless `retry_failed` (or the KBV3_RETRY_FAILED_BASELINE environment
    variable) asks to re-time."""
    return obtain(baseline_job(spec, **job))


def obtain(job: BaselineJob) -> dict[str, Any]:
    """`get_baseline` for a job: the cache's entry, or the child run now and `settle`d."""
    from . import isolate

    hit = cached_baseline(job)
    if hit is not None:
        return hit
    with tempfile.TemporaryDirectory(prefix="kbv3-baseline-") as tmp:
        outcome = isolate.run_child("baseline", Path(tmp), job.spec, timeout_s=job.timeout_s, env=job.env)
    return settle(job, outcome)


def _timed_otherwise(entry: Mapping[str, Any]) -> str:
    """Why a GPU baseline was not timed in the mode its key names ('' when it was): a child whose
    gate fell back (no HOLD for its context, say) timed the eager reference by another gate."""
    eager = entry.get("eager") or {}
    if eager.get("method") != "gated":
        return ""  # events: the key's gate and echo never applied
    under_mps = mps.in_use()
    wanted = (gate_kind(under_mps), echo_kind(under_mps))
    timed = (eager.get("gate"), eager.get("echo"))
    if timed == wanted or (timed == ("spin", wanted[1]) and wanted[0] in GRAPH_GATES):
        return ""  # under a graph gate a reference that cannot be captured is always held by the spin
    return f"timed with gate {timed[0]!r} and echo {timed[1]!r}, where the key names {wanted[0]!r} and {wanted[1]!r}"


def request_job(
    request: EvalRequest, problem: Any, source: str, sizes: dict[str, Any], cache_dir: Any, seconds: float
) -> BaselineJob:
    """The baseline job of one evaluation: the problem's verified source, its sizes and seeds."""
    from ....catalog.materialize import write_module_file

    module_path = write_module_file(source, stem=problem.name)  # verified content, not the checkout's file
    spec = {
        "device": request.device,
        "problem_path": str(module_path),
        "sizes": sizes,
        "seeds": list(request.seeds),
        "timing_seconds": seconds,
    }
    return baseline_job(
        spec,
        problem_sha256=hashlib.sha256(source.encode("utf-8")).hexdigest(),
        device_name=fingerprint.device_name(request.device),
        cache_dir=Path(cache_dir) if cache_dir is not None else None,
        timeout_s=request.timeout_s or DEFAULT_TIMEOUT_S,
        env={"TRITON_INTERPRET": "1" if request.device == "cpu" else "0"},
        retry_failed=request.retry_failed_baseline,
    )


def request_baseline(
    request: EvalRequest, problem: Any, source: str, sizes: dict[str, Any], cache_dir: Any, seconds: float
) -> dict[str, Any]:
    """`get_baseline` for one evaluation's `request_job`."""
    return obtain(request_job(request, problem, source, sizes, cache_dir, seconds))
