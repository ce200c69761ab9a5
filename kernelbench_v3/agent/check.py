"""The feedback path: what `check()` runs and the few lines it answers.

`check()` evaluates the workspace's `solution.py` as it is at the call (a content-addressed copy,
so what was checked is known) through the evaluator's public API, `evaluate`: the same
sandboxed solution process as any evaluation, every check, on the public seeds (stated in the
prompt and the workspace README), at the problem's sizes on CUDA with a short timing and its
speedup, at its reduced sizes on the CPU without timing (an interpreter's time is no figure).

Its answer is feedback only. Judging (`judge`) is a separate evaluation with secret seeds, and
nothing a check reported is read by it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..evaluate import EvalRequest, Record, evaluate
from ..paths import write_atomically

PUBLIC_SEEDS: tuple[int, ...] = (0, 1)  # the only seeds check() uses; the judge draws others
CHECK_TIMING_S = 1.0  # CUDA: a short timing budget per timed function (the judge times in full)
DETAIL_CHARS = 1500  # of one failure message

EvaluateFn = Callable[[EvalRequest], Record]


@dataclass(frozen=True)
class CheckSettings:
    """Where and how checks run: the split reported for, the device, the problems folder."""

    split: str
    device: str
    problems_root: str | None = None
    model: str = ""

    def request(self, problem_id: str, solution: Path) -> EvalRequest:
        on_cuda = self.device == "cuda"
        return EvalRequest(
            problem_id,
            solution,
            gpu=self.split,
            device=self.device,  # type: ignore[arg-type]
            seeds=PUBLIC_SEEDS,
            time_solution=on_cuda,
            timing_seconds=CHECK_TIMING_S if on_cuda else None,
            model=self.model,
        )


def version_file(folder: Path, text: str) -> Path:
    """`folder/<sha256[:16]>.py` holding `text` (written once): the copy a check or a judging
    evaluates, so the workspace can change while it runs and the transcript names what ran."""
    path = Path(folder) / f"{sha256_text(text)[:16]}.py"
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        write_atomically(path, text)
    return path


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def run_check(
    problem_id: str,
    solution_text: str,
    versions: Path,
    settings: CheckSettings,
    evaluate_fn: EvaluateFn | None = None,
) -> tuple[str, dict[str, Any]]:
    """Evaluate `solution_text` on the public seeds; returns (the answer to the model, the
    summary the transcript keeps)."""
    path = version_file(versions, solution_text)
    request = settings.request(problem_id, path)
    record = (evaluate_fn or _evaluate(settings))(request)
    return describe_check(record, settings.device), summary_of(record)


def _evaluate(settings: CheckSettings) -> EvaluateFn:
    return lambda request: evaluate(request, problems_dir=settings.problems_root)


def summary_of(record: Record) -> dict[str, Any]:
    """The fields of a check the transcript keeps (the full record is not needed to resume)."""
    return {
        "status": record.status,
        "correct": record.correct,
        "compiled": record.compiled,
        "failed_check": record.failed_check,
        "error": record.error,
        "max_abs_error": record.max_abs_error,
        "sol_ms": record.sol_ms,
        "speedup": record.speedup,
        "seeds": list(record.seeds),
        "solution_sha256": record.solution_sha256,
        "duration_s": record.duration_s,
    }


def describe_check(record: Record, device: str) -> str:
    """The answer to `check()`: the verdict, the failed check and its message, the largest
    error, the time and the speedup."""
    seeds = ", ".join(str(s) for s in record.seeds) or ", ".join(map(str, PUBLIC_SEEDS))
    if record.correct:
        passed = sum(1 for outcome in record.checks.values() if outcome == "pass")
        lines = [f"verdict: correct ({passed} checks passed on the public seeds {seeds})"]
    else:
        lines = [
            f"verdict: {record.status}" + (f", failed check: {record.failed_check}" if record.failed_check else "")
        ]
        detail = record.check_details.get(record.failed_check or "", "") or record.error or ""
        if detail:
            lines.append("message: " + _cut(detail))
    if record.max_abs_error is not None:
        lines.append(f"max abs error: {record.max_abs_error:.3g} (against the reference)")
    lines.append(_timing_line(record, device))
    if record.sizes_note:
        lines.append(f"sizes: {record.sizes_note}")
    lines.append("(feedback only: the judging after submit() uses other seeds and is all that is scored)")
    return "\n".join(lines)


def _timing_line(record: Record, device: str) -> str:
    if device != "cuda":
        return "time: not measured on the CPU (the Triton interpreter's time is no figure); speedup: n/a"
    if record.sol_ms is None:
        return f"time: none ({record.timing_skipped or 'not timed'}); speedup: n/a"
    speedup = (
        f"{record.speedup:.3g}x" if record.speedup is not None else f"n/a ({record.baseline_error or 'no baseline'})"
    )
    return f"time: {record.sol_ms:.4g} ms (short timing), speedup: {speedup}"


def _cut(text: str) -> str:
    text = text.strip()
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS] + " [...]"
