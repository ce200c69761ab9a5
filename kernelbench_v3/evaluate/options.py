"""How a solution is judged, apart from what is judged: the evaluator's options as one type.

`kbv3 eval`, `kbv3 eval-batch` and a batch's settings all carry an `EvalOptions`; a request is the
options plus the problem, the solution, the GPU, the device, the sizes and the model name. The
defaults and meanings of the fields are EvalRequest's (see its docstring), so both stay in step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..vocab import REQUESTABLE_KERNEL_RULES, TOLERANCE_MODES, Device, KernelRule, ToleranceMode
from .request import DEFAULT_SEEDS, EvalRequest


@dataclass(frozen=True)
class EvalOptions:
    """The judging options of EvalRequest, with its defaults."""

    tolerance: ToleranceMode = "v3"
    require_custom_kernel: bool = True
    kernel_rule: KernelRule = "strict"
    scan_source: bool = True
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    time_solution: bool = True
    baseline: bool | None = None  # None: on CUDA only (EvalRequest.baseline)
    other_shape: bool = True
    timing_seconds: float | None = None
    retry_failed_baseline: bool = False
    timeout_s: float | None = None  # None: each step's limit derived from the problem

    def __post_init__(self) -> None:
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        if self.tolerance not in TOLERANCE_MODES:
            raise ValueError(f"EvalOptions.tolerance must be one of {TOLERANCE_MODES}, got {self.tolerance!r}")
        if self.kernel_rule not in REQUESTABLE_KERNEL_RULES:
            raise ValueError(
                f"EvalOptions.kernel_rule must be one of {REQUESTABLE_KERNEL_RULES}, got {self.kernel_rule!r}"
            )

    def request(
        self,
        problem_id: str,
        solution_path: str | Path,
        *,
        gpu: str,
        device: Device,
        sizes: Mapping[str, Any] | tuple = (),
        model: str = "",
    ) -> EvalRequest:
        """The request that evaluates `solution_path` on `problem_id` with these options."""
        return EvalRequest(
            problem_id=problem_id,
            solution_path=solution_path,
            gpu=gpu,
            device=device,
            sizes=sizes,
            model=model,
            **dataclasses.asdict(self),
        )

    def changed(self) -> dict[str, Any]:
        """The options that differ from the defaults (what a batch journal records)."""
        default = EvalOptions()
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(default, f.name)
        }
