"""The per-call time from one-call windows: the estimator and its stopping rule (pure arithmetic).

`measure` times every call in a window of its own, by the timer's clock, and hands its net time
here: the call's window less the trusted echo's window right before it (the gate, the context
switch and the graph's launch processing with no work of the caller's, and the echo's own tiny
call, which stands for a launch's fixed cost: `measure` says why). The score is a robust
centre of the net times, their median; its confidence interval comes from order statistics (the
ranks n/2 -+ z*sqrt(n)/2 of the sorted net times), so it needs no assumption about the shape of
the noise, and a few delayed calls (the scheduler, a context switch) move neither the centre nor
the interval much. Timing stops (`should_stop`) at `max_calls`; after `min_calls` (and after
`at_least`, the calls judging needs: `judging.Judging.calls_needed`), once the interval's
half-width is within `target_rel` of the median or within `target_abs_s` (0.5% or 0.2 us on
CUDA, `CallPlan.for_device`); or when the timer's clock passes `cap_s` (with at least 3 calls).

The solution's calls (`time_solution`) and the trusted baseline child's (`time_reference`) are both timed by
`measure`, so a solution and its baseline are scored by one estimator under one stopping rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Z95 = 1.96


@dataclass(frozen=True)
class CallPlan:
    """How many one-call windows to run, and when to stop."""

    min_calls: int
    max_calls: int
    target_rel: float  # stop when the median's 95% interval half-width is this share of it ...
    cap_s: float  # the most seconds of timed calls, by the timer's clock
    target_abs_s: float = 0.0  # ... or at most this many seconds

    def __post_init__(self) -> None:
        if self.min_calls < 3 or self.max_calls < self.min_calls:
            raise ValueError(f"a call plan needs 3 <= min_calls <= max_calls, got {self.min_calls}, {self.max_calls}")

    @classmethod
    def for_device(cls, device: str, cap_s: float) -> CallPlan:
        if device == "cuda":
            # Per call the gated net times spread about +-2 us (p10-p90, under MPS on the H200;
            # docs/timing.md): a 0.2 us half-width (2% of a 10 us kernel, 0.4% of a 50 us one)
            # takes about 300 calls, where 0.5% of a 10 us kernel would never be reached. 0.5%
            # is a sixth of the 3% fidelity bound from 50 us up; at 60 calls the 54 h100
            # problems' intervals were already 0.01-0.7% (docs/timing.md, issue 42), so 20 calls
            # suffice where judging allows (`judging.Judging.calls_needed`).
            return cls(min_calls=20, max_calls=2000, target_rel=0.005, cap_s=cap_s, target_abs_s=0.2e-6)
        # CPU: interpreted kernels; the figure tests the machinery, it is no performance figure.
        return cls(min_calls=5, max_calls=200, target_rel=0.05, cap_s=cap_s)


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile by linear interpolation between order statistics."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("a quantile of no values")
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True)
class CallSummary:
    """The net times of one timing, summarised."""

    median_s: float
    p10_s: float
    p25_s: float
    p75_s: float
    p90_s: float
    ci_low_s: float
    ci_high_s: float
    calls: int

    @property
    def rel_halfwidth(self) -> float:
        if self.median_s <= 0:
            return math.inf
        return (self.ci_high_s - self.ci_low_s) / 2 / self.median_s

    def to_dict(self) -> dict[str, Any]:
        rel = self.rel_halfwidth
        return {
            "median_ms": self.median_s * 1e3,
            "p10_ms": self.p10_s * 1e3,
            "p25_ms": self.p25_s * 1e3,
            "p75_ms": self.p75_s * 1e3,
            "p90_ms": self.p90_s * 1e3,
            "ci95_ms": [self.ci_low_s * 1e3, self.ci_high_s * 1e3],
            "ci95_rel_halfwidth": round(rel, 6) if math.isfinite(rel) else None,
            "calls": self.calls,
        }


def summarize(net_s: Sequence[float]) -> CallSummary:
    """Median, quartiles and the median's 95% order-statistic interval of the net times."""
    n = len(net_s)
    if n == 0:
        raise ValueError("no timed calls to summarise")
    ordered = sorted(net_s)
    half = Z95 * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half))
    hi = min(n - 1, math.ceil(n / 2 + half) - 1)
    return CallSummary(
        median_s=quantile(ordered, 0.5),
        p10_s=quantile(ordered, 0.1),
        p25_s=quantile(ordered, 0.25),
        p75_s=quantile(ordered, 0.75),
        p90_s=quantile(ordered, 0.9),
        ci_low_s=ordered[lo],
        ci_high_s=ordered[max(hi, lo)],
        calls=n,
    )


def known(summary: CallSummary, plan: CallPlan) -> bool:
    """Whether the median is known well enough to stop: its interval's half-width within
    `target_rel` of it, or within `target_abs_s`."""
    if summary.calls < plan.min_calls:
        return False
    halfwidth = (summary.ci_high_s - summary.ci_low_s) / 2
    return summary.rel_halfwidth <= plan.target_rel or halfwidth <= plan.target_abs_s


def should_stop(net_s: Sequence[float], elapsed_s: float, plan: CallPlan, at_least: int = 0) -> bool:
    """Whether timing ends after these net times (module docstring); `at_least` raises
    `min_calls` (never past `max_calls`; the clock's cap still ends timing)."""
    n = len(net_s)
    if n >= plan.max_calls:
        return True
    if n < max(plan.min_calls, at_least):
        return elapsed_s > plan.cap_s and n >= 3
    return elapsed_s > plan.cap_s or known(summarize(net_s), plan)
