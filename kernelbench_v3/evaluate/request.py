"""The unit of work of the evaluator: one frozen request (which problem, which solution, where, how).

Batch evaluation builds these; `evaluate(request)` turns one into a `Record`. Fields are only
ever added (with defaults), never renamed, so stored requests keep meaning the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..vocab import DEVICES, REQUESTABLE_KERNEL_RULES, TOLERANCE_MODES, Device, KernelRule, ToleranceMode

# The published harness's correctness seeds; every evaluation logs the seeds it used.
DEFAULT_SEEDS: tuple[int, ...] = (42, 123, 456, 789, 1337)
# The supervisor's limit per step of one evaluation (import, each case, each timed call).
DEFAULT_TIMEOUT_S = 600.0
# The timing budget of each timed function when a request names none, by device (the one place
# the CLI's help, the README and the evaluator read it from).
DEFAULT_TIMING_SECONDS: dict[str, float] = {"cuda": 6.0, "cpu": 1.5}


@dataclass(frozen=True)
class EvalRequest:
    """Evaluate the solution file at `solution_path` on problem `problem_id`.

    - `gpu`: the split / GPU the result is reported for (`h100`, `b200`, `rtx3090`, or any name
      `kernelbench_v3.hardware.gpus` knows); it selects the speed-of-light figure, not the device.
    - `device`: where it runs: "cuda" (timed by the supervisor's one-call windows, docs/timing.md)
      or "cpu" (the Triton interpreter; the same windows test the machinery, no speedup).
    - `sizes`: size overrides (a mapping or pairs). Empty on CPU means the problem's
      REDUCED_SIZES (the record says so); empty on CUDA means the default shapes.
    - `tolerance`: "v3" (allclose atol=rtol=1e-2, comparable with the runs dataset),
      "published" (the published per-precision max-error rule) or "strict" (calibrated from the
      reference's own error against float64).
    - `require_custom_kernel`: when False, a solution without a custom kernel may still pass;
      the record says the check was relaxed.
    - `kernel_rule`: "strict" (own kernels ran, no library GEMM/conv/attention, own kernels do
      the main work) or "v3" (the published rule: an own kernel ran).
    - `scan_source`: the static tamper scan of the solution's source (a named check).
    - `timeout_s`: the supervisor's wall-clock limit for each step (import, each case, each
      timed call) and for the reference and baseline processes. None (the default) derives
      each step's limit from the problem (`supervisor.step_limits`: the reference's own time and
      the case count), so a solution that hangs fails within a minute; the reference and
      baseline processes then get `DEFAULT_TIMEOUT_S`.
    - `timing_seconds`: the timing budget of each timed function (solution, eager and compiled
      baseline); None means DEFAULT_TIMING_SECONDS for the device. Timed calls stop earlier
      once the median's 95% interval is narrow enough; a smaller budget trades precision for
      throughput.
    - `baseline`: time the reference (eager and `torch.compile`) for the speedup. None (the
      default): where a speedup is scored, on CUDA; not on the CPU, where interpreter timing is no
      performance figure and the speedup is never given, so its baseline would be timed only to be
      thrown away. True times it on the CPU too (the ratio lands in
      `timing_details.cpu_time_ratio`); False never (correctness screening). `wants_baseline`
      resolves it for the request's device.
    - `retry_failed_baseline`: re-time the baseline even when the cache holds a failure for it
      (failures are cached like successes; KBV3_RETRY_FAILED_BASELINE=1 does the same).
    """

    problem_id: str
    solution_path: str | Path
    gpu: str = "h100"
    device: Device = "cuda"
    sizes: tuple[tuple[str, int | float | bool], ...] | Mapping[str, Any] = ()
    timeout_s: float | None = None
    tolerance: ToleranceMode = "v3"
    require_custom_kernel: bool = True
    model: str = ""  # the agent / model name that wrote the solution (runs-dataset column)
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    time_solution: bool = True  # False: correctness only
    baseline: bool | None = None  # None: on CUDA only; True: also on the CPU; False: never (no speedup)
    other_shape: bool = True  # also check at a second shape when the problem has size variables
    max_log_bytes: int = 64_000  # how much child output is kept (the rest is dropped)
    retry_failed_baseline: bool = False
    timing_seconds: float | None = None
    kernel_rule: KernelRule = "strict"  # "strict" (default) or "v3" (the published rule only); see kernel_rule
    scan_source: bool = True  # the static tamper scan of the source (defence in depth; off only to study the rest)
    extra: tuple[tuple[str, Any], ...] = field(default=())  # free-form tags copied to nothing; for callers

    def __post_init__(self) -> None:
        if isinstance(self.sizes, Mapping):
            object.__setattr__(self, "sizes", tuple(sorted(self.sizes.items())))
        else:
            object.__setattr__(self, "sizes", tuple(tuple(p) for p in self.sizes))
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        if self.device not in DEVICES:
            raise ValueError(f"EvalRequest.device must be one of {DEVICES}, got {self.device!r}")
        if self.tolerance not in TOLERANCE_MODES:
            raise ValueError(f"EvalRequest.tolerance must be one of {TOLERANCE_MODES}, got {self.tolerance!r}")
        if self.kernel_rule not in REQUESTABLE_KERNEL_RULES:
            raise ValueError(
                f"EvalRequest.kernel_rule must be one of {REQUESTABLE_KERNEL_RULES}, got {self.kernel_rule!r}"
            )
        if not self.seeds:
            raise ValueError("EvalRequest.seeds must not be empty")
        if self.timing_seconds is not None and self.timing_seconds <= 0:
            raise ValueError(f"EvalRequest.timing_seconds must be positive, got {self.timing_seconds}")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ValueError(f"EvalRequest.timeout_s must be positive, got {self.timeout_s}")

    @property
    def wants_baseline(self) -> bool:
        """Whether this request times the baseline (`baseline` resolved for the device)."""
        return self.device == "cuda" if self.baseline is None else bool(self.baseline)

    @property
    def size_overrides(self) -> dict[str, Any]:
        return dict(self.sizes)  # type: ignore[arg-type]
