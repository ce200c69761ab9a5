"""The custom-kernel rule, decided from runtime evidence of the solution's forward.

Evidence (collected by `evidence` during one forward, in the solution process): the aten ops
dispatched, the Triton interpreter programs that ran (CPU), the device kernels the profiler saw
(CUDA). The rule (`strict`, the default: the published v3 rule made stronger):

- `custom_kernel`: at least one of the solution's own kernels really ran: on CUDA a device kernel
  that is neither library code nor a kernel the reference itself launched; on CPU an interpreter
  launch that completed with a non-empty grid. A launch wrapper that was merely called proves
  nothing, and a profiler that cannot run proves nothing either (the check fails closed).
- `library_ops`: no library GEMM, convolution or attention in the forward (aten ops such as
  `mm`, `addmm`, `convolution`, `_scaled_dot_product_*`; on CUDA also cuBLAS/cuDNN/flash
  device kernels), and no torch.compile.
- `main_work`: the solution's own kernels do the problem's main work: on CUDA they take at least
  `MAIN_WORK_SHARE` of the forward's device time; on CPU, where interpreted programs are far
  slower than PyTorch and device shares mean nothing, the forward's time outside its programs
  (numpy, ctypes, anything not dispatched through PyTorch) may not exceed the reference's own
  compute time (the interpreter's own cost inside a launch is the program's, and the evaluator's
  bookkeeping is nobody's), its output may not come from memory made outside PyTorch and the
  programs (`provenance.Provenance`), no launch may be refused for what its kernel body reaches
  (`kernel_reach`) or find memory written behind its programs while it ran, its programs must move at least `MAIN_WORK_SHARE` of the bytes that they and the
  PyTorch compute ops it dispatches (anything but allocation, views, copies and fills) load and
  store, and for a matrix product the programs' `tl.dot` must do at least that share of the
  reference's matmul FLOPs.

`v3` applies only `custom_kernel`, the published rule. `relaxed` (`--relax-kernel-check`) reports
what was seen and fails nothing.
"""

from __future__ import annotations

import re
from typing import Any

from ...kernels import custom_kernels, is_forbidden_kernel
from ...record import FAIL, PASS, SKIP

MAIN_WORK_SHARE = 0.5
CPU_OUTSIDE_SLACK_S = 0.0005  # glue an honest forward spends outside its programs, on a loaded CPU
# The evaluator's copy of a timed call's output into its slot: not the solution's work.
_SLOT_COPY = re.compile(r"at::native::.*[cC]opy|Memcpy|memcpy")

_LIBRARY_OPS = re.compile(
    r"^(?:mm|addmm|bmm|baddbmm|addbmm|matmul|linear|addmv|mv|dot|vdot|einsum|tensordot|_int_mm|_scaled_mm"
    r"|_weight_int\d+pack_mm\w*|_mixed_dtypes_linear|.*conv.*|.*scaled_dot_product.*|.*flash_attention.*"
    r"|.*efficient_attention.*|.*cudnn_attention.*|_fused_sdp\w*|_native_multi_head_attention|mkldnn_\w+)$"
)
# Ops that allocate, view, copy or move data: never the problem's main work.
DATA_OPS = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "new_zeros",
        "new_ones",
        "new_full",
        "fill_",
        "zero_",
        "copy_",
        "_to_copy",
        "clone",
        "contiguous",
        "view",
        "_unsafe_view",
        "reshape",
        "_reshape_alias",
        "as_strided",
        "expand",
        "permute",
        "transpose",
        "t",
        "unsqueeze",
        "squeeze",
        "slice",
        "select",
        "detach",
        "alias",
        "lift_fresh",
        "lift_fresh_copy",
        "resize_",
        "set_",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "narrow",
        "cat",
        "stack",
        "arange",
        "_local_scalar_dense",
        "item",
        "to",
        "view_as",
        "flatten",
        "unflatten",
        "_unsafe_split",
        "is_nonzero",
    }
)


def forbidden_ops(ops: dict[str, Any]) -> list[str]:
    return sorted(name for name in ops if _LIBRARY_OPS.match(name))


def reference_compute_ops(ops: dict[str, Any]) -> set[str]:
    """The aten ops the reference dispatches that compute (not allocation, views, copies, fills)."""
    return {name for name in ops if name not in DATA_OPS}


def compute_ops(ops: dict[str, list[float]]) -> dict[str, float]:
    """The reference's compute ops and their share of its op time."""
    seconds = {name: float(v[1]) for name, v in ops.items() if name not in DATA_OPS}
    total = sum(seconds.values())
    return {name: s / total for name, s in seconds.items()} if total > 0 else {}


def judge_kernel_evidence(
    evidence: dict[str, Any],
    *,
    device: str,
    rule: str,
    reference_ops: dict[str, list[float]],
    reference_kernels: list[str],
    reference_matmul_flops: float = 0.0,
    outside_s: float | None = None,
) -> tuple[dict[str, tuple[str, str]], dict[str, Any]]:
    """(check -> (outcome, detail), facts for the record) from one forward's evidence; on CPU
    `outside_s` replaces the time this forward spent outside its programs (`judge_samples`
    passes the least over all samples)."""
    out: dict[str, tuple[str, str]] = {}
    facts: dict[str, Any] = {"kernel_rule": rule}
    ops = evidence.get("ops") or {}
    if device == "cuda":
        times = [
            (str(n), float(us)) for n, us in (evidence.get("device_kernels") or []) if not _SLOT_COPY.search(str(n))
        ]
        own = custom_kernels([n for n, _ in times], reference_kernels)
        total = sum(us for _, us in times)
        share = sum(us for n, us in times if n in own) / total if total > 0 else 0.0
        facts.update(
            kernel_names=[n for n, _ in times], custom_kernels=own, custom_kernel_time_fraction=round(share, 4)
        )
        library = sorted({n for n, _ in times if is_forbidden_kernel(n)})
        if not evidence.get("profiler"):
            ran = (
                False,
                "the CUDA profiler could not run in the solution process, so no kernel was seen on the device",
            )
        else:
            ran = (
                bool(own),
                f"own device kernels: {own}"
                if own
                else f"no custom kernel ran on the device; seen: {[n for n, _ in times] or 'none'}",
            )
        main = (
            share >= MAIN_WORK_SHARE,
            f"own kernels take {share:.1%} of the forward's device time (at least {MAIN_WORK_SHARE:.0%} required)",
        )
    else:
        programs = [(str(n), int(p)) for n, p in (evidence.get("programs") or [])]
        own = sorted({n for n, p in programs if p > 0})
        facts.update(
            kernel_names=sorted({n for n, _ in programs}),
            custom_kernels=own,
            launches=len(programs),
            interpreter_programs=sum(p for _, p in programs),
            failed_launches=evidence.get("failed_launches", []),
        )
        ran = (
            bool(own),
            f"own kernels ran: {own}"
            if own
            else "no custom kernel: no Triton kernel of the solution completed a non-empty grid "
            f"(launches: {programs or 'none'}; failed: {evidence.get('failed_launches') or 'none'})",
        )
        library = []
        calls = max(1, int(evidence.get("calls") or 1))  # a timed window's evidence covers several calls
        data_s = sum(float(v[1]) for n, v in ops.items() if n in DATA_OPS)
        forward_s, program_s = (
            float(evidence.get("forward_seconds") or 0.0),
            float(evidence.get("program_seconds") or 0.0),
        )
        evaluator_s = float(evidence.get("evaluator_seconds") or 0.0)  # its own bookkeeping around ops
        outside = max(0.0, forward_s - program_s - data_s - evaluator_s) / calls if outside_s is None else outside_s
        reference_s = sum(float(v[1]) for n, v in reference_ops.items() if n not in DATA_OPS)
        dot_flops = float(evidence.get("dot_flops") or 0.0) / calls
        # What the memory traffic says (the CUDA rule's device-time share, for memory-bound work):
        # the bytes the programs loaded and stored against those PyTorch compute ops read and wrote.
        torch_ops = {n: float(v[2]) for n, v in ops.items() if len(v) > 2 and n not in DATA_OPS}
        torch_bytes = sum(torch_ops.values()) / calls
        program_bytes = float(evidence.get("program_bytes") or 0.0) / calls
        own_share = program_bytes / (program_bytes + torch_bytes) if program_bytes + torch_bytes > 0 else 1.0
        facts.update(
            outside_programs_s=round(outside, 6),
            program_bytes=program_bytes,
            torch_compute_bytes=torch_bytes,
            reference_compute_s=round(reference_s, 6),
            dot_flops=dot_flops,
            reference_matmul_flops=reference_matmul_flops,
        )
        reasons = []
        if outside > reference_s + CPU_OUTSIDE_SLACK_S:
            reasons.append(
                f"{outside * 1e3:.3g} ms of the forward ran outside its Triton programs, more than the "
                f"reference's own compute ({reference_s * 1e3:.3g} ms): the work is done elsewhere"
            )
        if evidence.get("refused_launches"):
            reasons.append(
                f"a kernel body reached beyond triton.language, so its launch was refused: "
                f"{evidence['refused_launches'][0]}"
            )
        if evidence.get("overwritten_launches"):
            reasons.append(
                "memory changed during launches of "
                f"{sorted(set(evidence['overwritten_launches']))} that their programs did not store "
                "(something else wrote it while they ran; it was put back)"
            )
        if evidence.get("output_foreign"):
            reasons.append(
                "the output was made from memory that appeared outside PyTorch and the solution's "
                "programs (numpy, ctypes, ...): the work was done there, and the kernels only moved it"
            )
        if own_share < MAIN_WORK_SHARE:
            reasons.append(
                f"PyTorch compute ops ({', '.join(sorted(torch_ops))}) moved {torch_bytes:.3g} bytes against the "
                f"programs' {program_bytes:.3g}: own kernels do {own_share:.0%} of the memory traffic "
                f"(at least {MAIN_WORK_SHARE:.0%} required)"
            )
        if reference_matmul_flops and dot_flops < MAIN_WORK_SHARE * reference_matmul_flops:
            reasons.append(
                f"the programs' tl.dot did {dot_flops:.3g} FLOPs of the reference's {reference_matmul_flops:.3g} "
                f"matmul FLOPs (at least {MAIN_WORK_SHARE:.0%} required)"
            )
        main = (
            not reasons,
            "; ".join(reasons) or f"the work ran in the solution's programs ({outside * 1e3:.3g} ms outside them)",
        )
    bad_ops = forbidden_ops(ops)
    own_ops = sorted(reference_compute_ops(reference_ops) & set(ops))
    compiled = int(evidence.get("compiled_frames") or 0)
    problems = (
        ([f"library ops dispatched: {bad_ops}"] if bad_ops else [])
        + ([f"the reference's own compute ops dispatched: {own_ops}"] if own_ops else [])
        + ([f"library device kernels: {library}"] if library else [])
        + ([f"torch.compile compiled {compiled} frame(s)"] if compiled else [])
    )
    facts["library_ops"] = sorted(set(bad_ops + own_ops)) + library
    if rule == "relaxed":
        out["custom_kernel"] = (SKIP, f"relaxed by request; {ran[1]}")
        return out, facts
    out["custom_kernel"] = (PASS if ran[0] else FAIL, ran[1])
    if rule == "strict":
        out["library_ops"] = (
            FAIL if problems else PASS,
            "; ".join(problems) or "no library GEMM/convolution/attention",
        )
        out["main_work"] = (PASS if main[0] else FAIL, main[1])
    return out, facts


def judge_samples(
    samples: list[tuple[str, dict[str, Any]]], **context: Any
) -> tuple[dict[str, tuple[str, str]], dict[str, Any]]:
    """Judge each sampled call's evidence; every sample must give the same verdict. The checks
    and facts are those of the first sample that fails (else the first), and a check whose
    outcome differs between samples fails, naming them."""
    judged = [(label, *judge_kernel_evidence(ev, **context)) for label, ev in samples]
    if context.get("device") == "cpu" and judged:
        # CPU main_work compares wall times that a loaded machine stretches: the median time the
        # samples spent outside their programs speaks for the forward (a few stretched samples
        # move it little; the least would let work done only in the timed calls, which
        # outnumber the cases, pass on a case's figure). Its other criteria (traffic,
        # provenance, FLOPs) stay each sample's own.
        outside = sorted(j[2].get("outside_programs_s", 0.0) for j in judged)
        middle = outside[(len(outside) - 1) // 2]  # the lower median: of two, the calmer
        judged = [(label, *judge_kernel_evidence(ev, **context, outside_s=middle)) for label, ev in samples]
    label, checks, facts = next(((lb, c, f) for lb, c, f in judged if any(o == FAIL for o, _ in c.values())), judged[0])
    checks = dict(checks)
    for name in checks:
        outcomes = {lb: c.get(name, (SKIP, ""))[0] for lb, c, _ in judged}
        if len(set(outcomes.values())) > 1:
            checks[name] = (FAIL, f"sampled calls disagree ({outcomes}): {checks[name][1]}")
    facts = dict(facts, evidence_samples=[lb for lb, _, _ in judged], judged_on=label)
    return checks, facts
