"""The evaluation record: one solution on one problem, as a flat, JSON-safe dataclass.

Owns the result schema. Column names shared with the runs dataset (`model, gpu, level, problem,
compiled, correct, speedup, ref_ms, sol_ms, op_type, baseline_type, precision_used`) mean the same
thing there and here, so published runs and local evaluations feed the same analysis:

- `problem` is the file name with `.py` (as in the runs dataset); `problem_id` is our catalog id;
- `gpu` is the split the result is reported for, as the runs dataset spells it (`H100`), `device`
  the torch device and `ran_on` the device the evaluation really ran on (`NVIDIA H200`, `cpu:...`);
- `compiled` is True when the solution imported, built and ran once without raising;
- `correct` is True only when every correctness check passed;
- `ref_ms` is the baseline time (the faster of eager and torch.compile), so
  `speedup = ref_ms / sol_ms`; `speedup` is None unless the solution is correct and timed on a
  GPU (`timing_meaningful`: a CPU time through the Triton interpreter is no performance figure);
- `sol_ms` (and `sol_p10_ms`, `sol_p90_ms`, `sol_cv`) is None unless the solution is correct: a
  time that failed a check is no time, and its raw figures are in `timing_details["unscored"]`.

Each check's outcome is in `checks` (name -> "pass" | "fail" | "skip" | "not run": it depends
on a check that failed first) with a one-line reason in
`check_details`; `failed_check` names the first failing check. Changes to this schema are
additive only: batch evaluation stores records and reads them back with `from_dict`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..vocab import RECORD_RUNS_COLUMNS, BaselineType, CheckOutcome, Device, KernelRule, Status, TimingMethod

SCHEMA_VERSION = 2  # 2: trusted supervisor, sandbox, kernel rule from evidence

PASS, FAIL, SKIP = "pass", "fail", "skip"
# The phases of `phase_s` split into steps, and their steps' prefix: the steps add up to the phase.
PHASE_STEPS: dict[str, str] = {"reference": "reference_", "baseline": "baseline_", "candidate": "solution_"}


def ran_out_of_memory(error: str) -> bool:
    """Whether a record's (or a baseline's) error is the device running out of memory, in torch's
    words: what else held the memory decides that as much as the code that asked for it."""
    return "OutOfMemoryError" in error or "CUDA out of memory" in error


def is_phase_step(name: str) -> bool:
    """Whether `name` in `phase_s` is a step of a split phase (counted in that phase)."""
    return any(name.startswith(prefix) for prefix in PHASE_STEPS.values())


NOT_RUN = "not run"  # a check that depends on one that failed first (e.g. stress after a wrong value)


@dataclass
class Record:
    """The outcome of evaluating one solution on one problem (JSON-safe via to_dict/from_dict)."""

    # --- runs-dataset columns ---
    model: str = ""
    gpu: str = ""
    level: int | None = None
    problem: str = ""
    compiled: bool = False
    correct: bool = False
    speedup: float | None = None
    ref_ms: float | None = None
    sol_ms: float | None = None
    op_type: str = ""
    baseline_type: BaselineType | None = None
    precision_used: str = ""

    # --- what was evaluated ---
    problem_id: str = ""
    problem_sha256: str = ""
    solution_path: str = ""
    solution_sha256: str = ""
    solution_class: str = ""  # "Model" or "ModelNew"
    device: Device | Literal[""] = ""
    ran_on: str = ""  # the GPU (or CPU) the evaluation ran on; `gpu` is the split reported for
    sizes: dict[str, Any] = field(default_factory=dict)  # the size overrides actually used
    sizes_note: str = ""  # e.g. why reduced sizes were used

    # --- verdict ---
    status: Status = "error"  # see vocab.Status
    error: str | None = None  # short reason when not correct
    failed_check: str | None = None
    checks: dict[str, str] = field(default_factory=dict)
    check_details: dict[str, str] = field(default_factory=dict)
    seeds: list[int] = field(default_factory=list)
    tolerance_mode: str = "v3"
    atol: float | None = None
    rtol: float | None = None
    max_abs_error: float | None = None  # worst over all compared cases, vs the reference
    rel_error: float | None = None  # worst ||out - ref|| / ||ref||, vs the float64 reference when possible
    error_reference: str = ""  # "float64" | "reference dtype"
    custom_kernel_required: bool = True
    kernel_names: list[str] = field(default_factory=list)  # kernels the solution launched
    triton_launches: int | None = None  # CPU: Triton interpreter launches that completed (evidence pass)
    reference_kernel_names: list[str] = field(default_factory=list)  # CUDA kernels the reference launched
    custom_kernel_time_fraction: float | None = None  # share of profiled device time in custom kernels (CUDA)
    kernel_rule: KernelRule | Literal[""] = ""  # the custom-kernel rule applied
    kernel_evidence: dict[str, Any] = field(default_factory=dict)  # what the rule was decided from
    sandbox: str = ""  # "landlock" | "namespaces" | "none": what confined the solution process
    sandbox_details: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # "name: detail" notes that do not fail the solution

    # --- timing ---
    timing_method: TimingMethod = ""  # "" (not timed)
    timing_skipped: str = ""  # why the solution was not timed (it was already found incorrect)
    event_ms: float | None = None  # the solution process's own CUDA-event figure per call: evidence, never scored
    eager_ms: float | None = None
    compiled_ms: float | None = None
    baseline_ms: float | None = None
    baseline_cached: bool | None = None
    baseline_error: str | None = None  # why there is no baseline (then speedup is None); may be a cached failure
    sol_p10_ms: float | None = None
    sol_p90_ms: float | None = None
    sol_cv: float | None = None
    sol_reps: int | None = None
    sol_wall_ms: float | None = None  # the event-method evaluator's back-to-back wall clock (no longer set)
    timing_flags: list[str] = field(default_factory=list)
    timing_details: dict[str, Any] = field(default_factory=dict)
    # False where the time is no performance figure (CPU: the Triton interpreter's wall clock tests
    # the machinery), and then `speedup` is None and `timing_note` says why; None when not timed.
    timing_meaningful: bool | None = None
    timing_note: str = ""

    # --- roofline ---
    sol_roofline_ms: float | None = None  # speed-of-light time on `gpu` for this problem
    sol_fraction: float | None = None  # sol_roofline_ms / sol_ms (1.0 = at speed of light)

    # --- provenance ---
    fingerprint: dict[str, Any] = field(default_factory=dict)
    started_at: str = ""
    duration_s: float | None = None
    # Seconds per phase: setup, reference (with its reference_* steps), baseline (with its
    # baseline_* steps when timed now), candidate (with its solution_* steps), verdict, cleanup,
    # bookkeeping; the top-level ones add up to duration_s.
    phase_s: dict[str, float] = field(default_factory=dict)
    # The whole process's wall (`kbv3 eval`; `evaluate.wall`): seconds from its start to the record,
    # their ordered parts (the CLI's steps, the evaluation's phases with `reference` and `candidate`
    # split into their steps, `unattributed`; they add up to wall_s) and work that ran beside them.
    # Empty where no CLI process measured them (eval-batch, serve, the API) and in older records.
    wall_s: float | None = None
    wall_phase_s: dict[str, float] = field(default_factory=dict)
    wall_background_s: dict[str, float] = field(default_factory=dict)
    # The reference came from a cache: from disk its float64 runs and profile, from a batch
    # worker's memory all of it (None: the disk cache is off and nothing was kept in memory).
    reference_cached: bool | None = None
    evaluator_version: int = SCHEMA_VERSION
    log_tail: str = ""  # last lines the child wrote to stdout/stderr (never parsed)

    def check(self, name: str, outcome: CheckOutcome, detail: str = "") -> None:
        """Set one check's outcome; the first failure becomes `failed_check`."""
        if outcome not in (PASS, FAIL, SKIP, NOT_RUN):
            raise ValueError(f"check outcome must be pass/fail/skip/not run, got {outcome!r}")
        self.checks[name] = outcome
        if detail:
            self.check_details[name] = detail
        if outcome == FAIL and self.failed_check is None:
            self.failed_check = name

    def fail(self, status: Status, error: str, check: str | None = None) -> Record:
        self.status = status
        self.correct = False
        self.speedup = None
        self.error = error if self.error is None else self.error
        if check is not None:
            self.check(check, FAIL, error)
        return self

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _json_safe(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=False, allow_nan=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Record:
        """Build a Record from `to_dict()` output; unknown keys (newer schema) are ignored."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def from_json(cls, text: str) -> Record:
        return cls.from_dict(json.loads(text))

    def runs_row(self) -> dict[str, Any]:
        """Only the runs-dataset columns, in their order."""
        return {name: _json_safe(getattr(self, name)) for name in RECORD_RUNS_COLUMNS}


def _json_safe(value: Any) -> Any:
    """Lists/dicts/str/int/float/bool/None only; non-finite floats become None."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item"):  # numpy / torch scalars
        try:
            return _json_safe(value.item())
        except (TypeError, ValueError):
            pass
    return str(value)
