"""The local evaluator: is a solution correct (in ways that cannot be gamed) and how fast is it.

Public API:

    from kernelbench_v3.evaluate import EvalRequest, Record, evaluate
    record = evaluate(EvalRequest("level1/23_Softmax", "sol.py", device="cpu"))

`evaluate` never raises for a bad solution: crashes, hangs, wrong answers and cheats all come
back as a Record with `correct=False` and the reason. It raises only for bad requests (unknown
problem, missing solution file) and for a CUDA context an earlier fault left unusable
(`CudaContextLost`: under MPS one client's fault reaches every client; start a new process).

Trust lives in one process, and the layout shows where. The supervisor (`supervisor/`, in the
caller's process) never imports the solution; it computes the reference, gets the baseline (in a
child that runs only reference code), and has a zygote (`solution.zygote`) fork a fresh solution
process (`solution.worker`) that enters a sandbox before it imports the solution. The two talk
over a data-only protocol (`protocol/`); the supervisor judges (`supervisor.verdict`) and times
the solution by windows it opens and closes (`supervisor.timing`), in memory it owns.

This module is the evaluator's one seam: the batch, the service, the CLI, the prompts, the
workers and the agent import only `kernelbench_v3.evaluate` (tests/test_imports.py holds them to
it). Beside `evaluate` it offers what they need, each named for its use: the record's display
(`describe_record`, `speedup_text`), the machine's name (`device_name`), filling the baseline
cache (`fill_baselines`), a GPU's turns between the evaluations that share it (`GpuTurns`,
`Lender`, `SOLUTION_LOCK`, `GPU_LOCK`: a batch's workers on one GPU), ending a killed worker's
whole process tree (`kill_descendants`), a long-lived worker's warm state (`keep_zygotes_warm`,
`start_warm_zygote`, `close_warm_zygotes`, `keep_references_warm`), the warm server that runs
whole `kbv3 eval` runs (`warm_server_enabled`, `warm_server_connect`, `warm_server_main`, `warm_server_leave`,
`die_with_process`: `cli.served`), a process's whole wall clock
(`Wall`, `process_started`: `Record.wall_phase_s`) and the supervisor's import (`load_supervisor`), the MPS daemon (`mps_wanted`, `mps_daemon`, `mps_starting`,
`cuda_context_lost`), the rules a prompt states (`V3_TOLERANCE`, `PRECISION_MARGIN`,
`MAIN_WORK_SHARE`) and the frames the local service reuses (`Link`, `Deadline`, `PeerGone`,
`ProtocolError`, `MAX_FRAME_BYTES`). Names that need torch load on first use (`__getattr__`), so
importing this module stays light.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .display import describe_record, speedup_text
from .fingerprint import device_name
from .mps import CudaContextLost, cuda_context_lost
from .mps import daemon as mps_daemon
from .mps import starting as mps_starting
from .mps import wanted as mps_wanted
from .options import EvalOptions
from .process_tree import kill_descendants
from .protocol.frames import MAX_FRAME_BYTES, Deadline, Link, PeerGone, ProtocolError
from .record import Record, ran_out_of_memory
from .request import DEFAULT_SEEDS, DEFAULT_TIMING_SECONDS, EvalRequest
from .supervisor.run import GPU_LOCK, SOLUTION_LOCK, GpuTurns, Lender
from .wall import Wall, process_started

__all__ = [
    "DEFAULT_SEEDS",
    "DEFAULT_TIMING_SECONDS",
    "GPU_LOCK",
    "MAIN_WORK_SHARE",
    "MAX_FRAME_BYTES",
    "PRECISION_MARGIN",
    "V3_TOLERANCE",
    "BaselineResult",
    "CudaContextLost",
    "Deadline",
    "EvalOptions",
    "EvalRequest",
    "GpuTurns",
    "Lender",
    "Link",
    "PeerGone",
    "ProtocolError",
    "Record",
    "SOLUTION_LOCK",
    "Wall",
    "close_warm_zygotes",
    "cuda_context_lost",
    "describe_record",
    "device_name",
    "evaluate",
    "fill_baselines",
    "keep_references_warm",
    "keep_zygotes_warm",
    "kill_descendants",
    "load_supervisor",
    "mps_daemon",
    "mps_starting",
    "mps_wanted",
    "process_started",
    "ran_out_of_memory",
    "speedup_text",
    "start_warm_zygote",
    "die_with_process",
    "warm_server_connect",
    "warm_server_enabled",
    "warm_server_leave",
    "warm_server_main",
]


# The warm server's public names and what they are in `solution.zygote_server`.
_WARM_SERVER = {
    "warm_server_enabled": "enabled",
    "warm_server_connect": "connect",
    "warm_server_leave": "leave",
    "warm_server_main": "server_main",
}


def __getattr__(name: str) -> Any:
    """The public names that import torch, loaded on first use (PEP 562)."""
    if name in ("V3_TOLERANCE", "PRECISION_MARGIN", "MAIN_WORK_SHARE"):
        from .supervisor import verdict

        return getattr(verdict, name)
    if name in ("fill_baselines", "BaselineResult", "keep_references_warm"):
        from .supervisor import reference

        return getattr(reference, name)
    if name in _WARM_SERVER:
        from .solution import zygote_server

        return getattr(zygote_server, _WARM_SERVER[name])
    if name == "die_with_process":
        from .lifetime import die_with_process

        return die_with_process
    if name in ("keep_zygotes_warm", "start_warm_zygote", "close_warm_zygotes"):
        from .supervisor import run

        return getattr(run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_supervisor() -> None:
    """Import the supervisor (torch, Triton, the evaluator) now, as the first `evaluate` would:
    `kbv3 eval` does it in a named step, beside the MPS daemon's start and its zygote's import."""
    from .supervisor.run import run_evaluation  # noqa: F401

    try:  # the record's fingerprint names Triton's version: its import belongs here too
        import triton  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken Triton is the record's to report
        pass


def evaluate(
    request: EvalRequest | str | Mapping[str, Any],
    solution: str | Path | None = None,
    *,
    problems_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    gpu_turns: GpuTurns | None = None,
    **options: Any,
) -> Record:
    """Evaluate one solution. `request` is an EvalRequest, or a problem id or a dataset row
    (from `load_problems`) with `solution` and EvalRequest's options as keywords:

        evaluate(EvalRequest("level1/23_Softmax", "sol.py", device="cpu"))
        evaluate("level1/23_Softmax", "sol.py", device="cpu")
        evaluate(rows[0], "sol.py", device="cpu")   # the row's code, verified by its sha256

    `cache_dir` holds the baseline cache (default `$KBV3_CACHE_DIR` or `~/.cache/kbv3`).
    `gpu_turns` shares the GPU with other evaluations (a batch's workers on one GPU) while
    keeping every solution process and every timed second to itself (`supervisor.run.turns`);
    by default the evaluation shares its GPU with no one."""
    from .supervisor.run import run_evaluation

    if isinstance(request, EvalRequest):
        if solution is not None or options:
            raise TypeError("evaluate(EvalRequest) takes no solution or options: they are in the request")
        return run_evaluation(request, problems_dir=problems_dir, cache_dir=cache_dir, gpu_turns=gpu_turns)
    if solution is None:
        raise TypeError("evaluate(problem, solution, ...) needs the solution file")
    if isinstance(request, str):
        request = EvalRequest(request, solution, **options)
        return run_evaluation(request, problems_dir=problems_dir, cache_dir=cache_dir, gpu_turns=gpu_turns)
    with tempfile.TemporaryDirectory(prefix="kbv3-row-") as tmp:
        problem_id = _write_row(request, Path(tmp))
        request = EvalRequest(problem_id, solution, **options)
        return run_evaluation(request, problems_dir=tmp, cache_dir=cache_dir, gpu_turns=gpu_turns)


def _write_row(row: Mapping[str, Any], root: Path) -> str:
    """Write a verified dataset row's code where the catalog finds it; returns its problem id."""
    from ..catalog.materialize import verify_row

    verify_row(row)
    category, file_name = str(row["category"]), str(row["file_name"])
    if "/" in category or "/" in file_name or file_name != Path(file_name).name or not file_name.endswith(".py"):
        raise ValueError(
            f"row {row.get('problem_id')!r}: category {category!r} / file_name {file_name!r} is not a problem path"
        )
    (root / category).mkdir(parents=True)
    (root / category / file_name).write_text(row["code"], encoding="utf-8")
    return f"{category}/{Path(file_name).stem}"
