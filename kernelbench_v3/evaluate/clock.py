"""Timing a solution from the supervisor: batches it starts, outputs it verifies, a clock it owns.

The solution process times its calls the evaluator's way (`cuda_timing.CudaTimer`: L2 flush, busy
GPU, events; or wall clock on the CPU) and reports the figures: evidence. The supervisor:

- starts every batch and decides, by its own clock, when timing stops (`TimingPlan` budget), so
  a forged clock in the solution process ends in bounded time;
- reveals each batch's fresh-input weights only when it starts the batch, then, after the batch,
  picks sample positions and calls at random and compares those timed outputs with the
  reference on the same inputs (`timed_outputs`): skipped work, stale or uninitialized outputs
  and reused output memory fail there, not only on the last call;
- measures its own wall clock around back-to-back batches (fresh inputs written first, whose
  cost it measures on its own device and subtracts, then calls with nothing between them) and bounds the
  reported time with it: a reported median that the supervisor's clock cannot explain
  (`BOUND_FACTOR` x reported + an allowance for launch overhead) is replaced by the supervisor's
  figure and flagged `supervisor_clock`. The bound is loose by the launch overhead of a call
  (`BOUND_ALLOWANCE_MS`): back to back, a kernel of a few microseconds is host-bound, and host
  time is not part of the score.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .cases import FRESH_PARTNER, blend_into
from .channel import Layout, TensorRef
from .checks import compare_case
from .fresh import REUSE_RATIO, reuse_verdict
from .messages import Failed, OutputInfo, TimeBatch, Warmup
from .session import Session, SessionLost
from .timing import CLOCK_CHANGE_REL, CPU_REUSE_RATIO, median_ci_rel, timing_stats

SUPERVISOR_CLOCK = "supervisor_clock"  # the reported time was replaced by the supervisor's
BOUND_FACTOR = 1.5
CPU_BOUND_FACTOR = 3.0
# Launch overhead an honest host-bound call adds to its device time: back to back, a forward of a
# few microseconds of device work is host-bound (docs/timing.md, "The supervisor and its bound").
BOUND_ALLOWANCE_MS = 0.05
SAMPLE_POSITIONS = 2048
MAX_VERIFIED = 24  # timed outputs checked against the reference per evaluation
BACK_TO_BACK_BATCHES = 3
BACK_TO_BACK_TARGET_MS = 5.0
BACK_TO_BACK_BYTES = 1 << 30  # inputs and outputs of one back-to-back batch, at most
REQUEST_LATENCY_MS = 0.3  # a request's round trip, spread over the calls of a back-to-back batch


@dataclass(frozen=True)
class ClockPlan:
    device: str
    budget_s: float  # supervisor seconds for the flushed batches
    batch: int  # calls per flushed batch
    min_reps: int
    max_reps: int
    min_seconds: float
    stable_rel: float
    warmup_seconds: float
    bound_factor: float  # the supervisor's figure may exceed the reported one by this factor (+ allowance)

    @classmethod
    def for_device(cls, device: str, budget_s: float) -> ClockPlan:
        if device == "cuda":
            return cls(device, budget_s, 10, 30, 10_000, 1.0, 0.003, 0.5, BOUND_FACTOR)
        # A CPU shared with other work (CI, several evaluations at once) makes the two wall
        # clocks disagree by more; a forged clock is off by orders of magnitude.
        return cls(device, budget_s, 2, 3, 50, 0.0, 0.02, 0.0, CPU_BOUND_FACTOR)


@dataclass
class TimingOutcome:
    stats: dict[str, Any] | None = None
    flags: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)  # timed outputs that did not match
    verified: int = 0


class Verifier:
    """Checks sampled timed outputs against the reference on the same blended inputs."""

    def __init__(
        self,
        expected_for: Callable[[list[Any]], torch.Tensor],
        sets: list[list[Any]],
        partner: list[Any],
        entry: dict[str, Any],
        tolerance: str,
        precision: str,
        rng: random.Random,
    ):
        self.expected_for, self.sets, self.partner = expected_for, sets, partner
        self.entry, self.tolerance, self.precision, self.rng = entry, tolerance, precision, rng
        self.numel = math.prod(entry["shape"])

    def blended(self, j: int, w: float) -> list[Any]:
        base = self.sets[j % len(self.sets)]
        out = [x.clone() if isinstance(x, torch.Tensor) else x for x in base]
        return blend_into(out, base, self.partner, w)

    def check(self, name: str, samples: torch.Tensor, index: torch.Tensor, info: OutputInfo, j: int, w: float) -> str:
        """'' when call j's sampled output matches the reference, else why not."""
        if info.type_name != "Tensor":
            return f"{name}: the solution returned {info.type_name}, not a tensor"
        if list(info.shape) != list(self.entry["shape"]) or f"torch.{info.dtype}" != self.entry["dtype"]:
            return f"{name}: shape {info.shape} / {info.dtype}, expected {tuple(self.entry['shape'])} / {self.entry['dtype']}"
        expected = self.expected_for(self.blended(j, w)).reshape(-1)[index].to(torch.float64)
        verdict = compare_case(
            name, "timed_outputs", samples, {"expected": expected}, self.entry, self.tolerance, self.precision, None
        )
        return "; ".join(verdict.failures.values())


def _sample(
    session: Session, verifier: Verifier, rng: random.Random, calls: int, timeout_s: float
) -> tuple[torch.Tensor, torch.Tensor, list[OutputInfo]]:
    """Ask for the same random positions of every output of the batch just run."""
    k = min(SAMPLE_POSITIONS, verifier.numel)
    generator = torch.Generator().manual_seed(rng.getrandbits(62))
    index = torch.randperm(verifier.numel, generator=generator)[:k] if k < verifier.numel else torch.arange(k)
    layout = Layout(session.output_offset)
    index_ref = session.arena.put(layout.take(index.numel() * 8), index)
    target_ref = TensorRef(layout.take(calls * k * 8), (calls, k), "float64")
    if layout.end > session.output_offset + session.output_capacity:
        raise SessionLost("internal: the output region cannot hold the samples")
    session.arena.view(target_ref).fill_(float("nan"))
    reply, _ = session.request(
        {"kind": "sample", "index": index_ref.to_json(), "target": target_ref.to_json(), "numel": verifier.numel},
        timeout_s,
        ("batch_done",),
    )
    if isinstance(reply, Failed):
        raise SessionLost(f"sampling the timed outputs failed: {reply.error[:300]}")
    outputs = reply.outputs
    if len(outputs) != calls:
        raise SessionLost(f"the solution process returned {len(outputs)} timed outputs for {calls} calls")
    return session.arena.view(target_ref).clone(), index, outputs


def _verify_batch(
    outcome: TimingOutcome,
    session: Session,
    verifier: Verifier,
    weights: list[float],
    label: str,
    picks: int,
    timeout_s: float,
) -> float:
    """Sample the batch's outputs, check `picks` random calls; returns the sampling wall seconds."""
    started = time.perf_counter()
    samples, index, infos = _sample(session, verifier, verifier.rng, len(weights), timeout_s)
    wall = time.perf_counter() - started
    for j in verifier.rng.sample(range(len(weights)), min(picks, len(weights))):
        if outcome.verified >= MAX_VERIFIED:
            break
        outcome.verified += 1
        why = verifier.check(f"{label} call {j}", samples[j], index, infos[j], j, weights[j])
        if why:
            outcome.failures.append(why)
    return wall


def _weights(rng: random.Random, n: int) -> list[float]:
    return [round(rng.uniform(0.2, 0.8), 6) for _ in range(n)]


def blend_seconds(verifier: Verifier, weights: list[float], device: str) -> float:
    """How long the supervisor's own device takes to write these fresh inputs, back to back."""
    sets = [[x.to(device) if isinstance(x, torch.Tensor) else x for x in s] for s in verifier.sets]
    partner = [x.to(device) if isinstance(x, torch.Tensor) else x for x in verifier.partner]
    best = math.inf
    for _ in range(3):  # the same work as `FreshInputs.new_set` for every call of the batch
        if device == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        made = []
        for j, w in enumerate(weights):
            base = sets[j % len(sets)]
            made.append(blend_into([x.clone() if isinstance(x, torch.Tensor) else x for x in base], base, partner, w))
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - started)
        del made
    return best


def _flushed_phase(
    outcome: TimingOutcome, session: Session, plan: ClockPlan, verifier: Verifier, request_timeout_s: float
) -> tuple[Any, int]:
    """Flushed batches until the reported median is stable or the supervisor's budget is spent;
    (the stats of the reported fresh-input times, how many batches added up to more than their wall)."""
    rng = verifier.rng
    fresh_ms: list[float] = []
    repeated_ms: list[float] = []
    started = time.perf_counter()
    batches, inconsistent = 0, 0
    while True:
        weights = _weights(rng, plan.batch)
        reply, wall = session.request(TimeBatch("flushed", weights, []), request_timeout_s, ("batch_done",))
        if isinstance(reply, Failed):
            raise SessionLost(f"a timed call failed: {reply.error[:500]}")
        fresh, repeated = reply.fresh_ms, reply.repeated_ms
        if len(fresh) != len(weights) or len(repeated) != len(weights):
            raise SessionLost("the solution process reported a different number of timed calls than it was asked for")
        # The events lie inside the batch: figures that add up to more than its wall clock are forged.
        if sum(fresh) + sum(repeated) > 1.05 * wall * 1e3 + 1.0 or min(fresh + repeated) <= 0:
            inconsistent += 1
        fresh_ms += fresh
        repeated_ms += repeated
        picks = 3 if batches < 3 else (2 if rng.random() < 0.25 else 0)
        if picks:
            _verify_batch(outcome, session, verifier, weights, f"timed batch {batches}", picks, request_timeout_s)
        batches += 1
        elapsed = time.perf_counter() - started
        positive = [t for t in fresh_ms if t > 0] or [0.0]
        stable = (
            len(fresh_ms) >= plan.min_reps
            and elapsed >= plan.min_seconds
            and median_ci_rel(positive) <= plan.stable_rel
        )
        if batches >= 2 and (stable or len(fresh_ms) >= plan.max_reps or elapsed > plan.budget_s):
            break
    stats = timing_stats([max(t, 0.0) for t in fresh_ms], "cuda_events" if plan.device == "cuda" else "cpu_wall_clock")
    stats.details.update(
        stable=stable,
        batches=batches,
        median_ci_rel=round(median_ci_rel(positive), 5),
        timed_inputs="fresh (a never-seen blend before each call); repeated sets in input_reuse",
    )
    ratio = REUSE_RATIO if plan.device == "cuda" else CPU_REUSE_RATIO
    stats.details["input_reuse"] = reuse = reuse_verdict(fresh_ms, repeated_ms, ratio)
    if reuse["faster_on_repeated_inputs"]:
        stats.flags.append("faster_on_repeated_inputs")
    if not stable:
        stats.flags.append("median_not_stable")
    return stats, inconsistent


def time_solution(
    session: Session,
    plan: ClockPlan,
    verifier: Verifier,
    timing_cases: list[str],
    out_bytes: int,
    request_timeout_s: float,
) -> TimingOutcome:
    """Warm up, run flushed batches until the reported median is stable or the budget is spent,
    then back-to-back batches for the supervisor's bound. Raises SessionLost."""
    outcome = TimingOutcome()
    reply, warm_s = session.request(
        Warmup(timing_cases, FRESH_PARTNER, plan.warmup_seconds), request_timeout_s + 30.0, ("warm",)
    )
    if isinstance(reply, Failed):
        raise SessionLost(f"warm-up failed: {reply.error[:500]}")
    outcome.details.update(host_enqueue_ms=reply.enqueue_ms, sm_clock_mhz=reply.sm_clock_mhz, warmup_s=round(warm_s, 3))
    stats, inconsistent = _flushed_phase(outcome, session, plan, verifier, request_timeout_s)
    if plan.device == "cuda":
        # The SM clock moved while timing, so part of the samples ran slower; the GPU is warm
        # now, so time once more and keep that (docs/timing.md, "Clock settling").
        reply, _ = session.request({"kind": "clock"}, request_timeout_s, ("warm",))
        before, after = outcome.details.get("sm_clock_mhz") or 0.0, reply.sm_clock_mhz
        outcome.details.update(sm_clock_mhz_before=before, sm_clock_mhz_after=after)
        if before and abs(after - before) > CLOCK_CHANGE_REL * before:
            first = stats
            stats, again = _flushed_phase(outcome, session, plan, verifier, request_timeout_s)
            inconsistent += again
            stats.details["clock_retry"] = {"first_median_ms": first.median_ms, "first_sm_clock_mhz": [before, after]}
    outcome.stats = stats.to_dict()
    _bound(outcome, session, verifier, plan, stats.median_ms, out_bytes, request_timeout_s, inconsistent)
    return outcome


def _bound(
    outcome: TimingOutcome,
    session: Session,
    verifier: Verifier,
    plan: ClockPlan,
    reported_ms: float,
    out_bytes: int,
    request_timeout_s: float,
    inconsistent: int,
) -> None:
    in_bytes = sum(x.numel() * x.element_size() for x in verifier.sets[0] if isinstance(x, torch.Tensor))
    """Back-to-back batches timed by the supervisor's clock; replace an unexplained report."""
    calls = int(min(64, max(8, math.ceil(BACK_TO_BACK_TARGET_MS / max(reported_ms, 1e-3)))))
    calls = max(2, min(calls, BACK_TO_BACK_BYTES // max(out_bytes + in_bytes, 1)))
    per_call: list[float] = []
    # Batch 0 is not counted: it pays for the allocator growing to hold a batch's inputs and outputs.
    for b in range(BACK_TO_BACK_BATCHES + 1):
        weights = _weights(verifier.rng, calls)
        reply, wall = session.request(TimeBatch("back_to_back", weights, []), request_timeout_s, ("batch_done",))
        if isinstance(reply, Failed):
            raise SessionLost(f"a back-to-back call failed: {reply.error[:500]}")
        sample_s = _verify_batch(outcome, session, verifier, weights, f"back-to-back batch {b}", 2, request_timeout_s)
        outcome.details.setdefault("supervisor_sample_s", []).append(round(sample_s, 4))
        if b:
            blend_s = blend_seconds(verifier, weights, plan.device)
            per_call.append(max(wall - blend_s, 0.0) * 1e3 / calls)
    # Every batch's figure is at least the true cost of its calls (plus host overhead and noise),
    # so the least of them is the tightest bound that is still sound.
    supervisor_ms = min(per_call)
    allowance = BOUND_ALLOWANCE_MS + REQUEST_LATENCY_MS / calls
    outcome.details.update(
        supervisor_ms=round(supervisor_ms, 6),
        supervisor_calls=calls,
        supervisor_per_batch_ms=[round(t, 6) for t in per_call],
        supervisor_rule=f"reported median >= (supervisor_ms - {allowance:.4g} ms) / {plan.bound_factor:g}",
        reported_ms=reported_ms,
        verified_timed_outputs=outcome.verified,
    )
    if supervisor_ms > plan.bound_factor * reported_ms + allowance or inconsistent:
        outcome.flags.append(SUPERVISOR_CLOCK)
        outcome.details["sol_ms_source"] = (
            "the supervisor's wall clock per back-to-back call (the reported figures "
            + ("added up to more than the batch's wall clock" if inconsistent else "are below what its clock allows")
            + ")"
        )
        outcome.details["scored_ms"] = max(supervisor_ms, reported_ms)
