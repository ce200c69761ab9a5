"""The custom-kernel rule decided from evidence: each way of bending it, on CUDA and CPU evidence."""

from __future__ import annotations

import pytest

from kernelbench_v3.evaluate.evidence import OpRecorder
from kernelbench_v3.evaluate.supervisor.verdict import kernel_rule

CUBLAS = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
SOFTMAX_REF_OPS = {"_softmax": [1, 0.004]}
GEMM_REF_OPS = {"addmm": [1, 0.009], "div": [1, 0.0005], "gelu": [1, 0.0005]}


def _cuda(kernels, ops=None, profiler=True, compiled=0, rule="strict", reference_kernels=(), reference_ops=None):
    evidence = {"ops": ops or {}, "device_kernels": kernels, "profiler": profiler, "compiled_frames": compiled}
    return kernel_rule.judge_kernel_evidence(
        evidence,
        device="cuda",
        rule=rule,
        reference_ops=reference_ops or {},
        reference_kernels=list(reference_kernels),
    )


def _cpu(programs, ops=None, reference_ops=SOFTMAX_REF_OPS, rule="strict", failed=()):
    evidence = {"ops": ops or {}, "programs": programs, "failed_launches": list(failed), "compiled_frames": 0}
    return kernel_rule.judge_kernel_evidence(
        evidence, device="cpu", rule=rule, reference_ops=reference_ops, reference_kernels=[]
    )


def test_an_honest_cuda_forward_passes_all_three():
    out, facts = _cuda([["softmax_kernel", 14.0]], ops={"empty_like": [1, 0.0]})
    assert {k: v[0] for k, v in out.items()} == {"custom_kernel": "pass", "library_ops": "pass", "main_work": "pass"}
    assert facts["custom_kernel_time_fraction"] == 1.0


def test_a_token_kernel_beside_library_work_fails_main_work():
    # torch.softmax does the work (at:: kernel, 13 us) beside a one-element Triton kernel (1 us).
    out, facts = _cuda(
        [["void at::native::cunn_SoftMaxForward<4>", 13.0], ["noop_kernel", 1.0]], ops={"_softmax": [1, 0.0]}
    )
    assert out["custom_kernel"][0] == "pass"
    assert out["main_work"][0] == "fail" and "7.1%" in out["main_work"][1]
    assert facts["custom_kernel_time_fraction"] == pytest.approx(1 / 14, abs=1e-4)


def test_library_gemm_with_an_own_epilogue_fails_library_ops():
    out, _ = _cuda([[CUBLAS, 60.0], ["epilogue_kernel", 40.0]], ops={"mm": [1, 0.0]})
    assert out["library_ops"][0] == "fail"
    assert "'mm'" in out["library_ops"][1] and "cublas" in out["library_ops"][1]


@pytest.mark.parametrize(
    "op",
    [
        "mm",
        "addmm",
        "bmm",
        "baddbmm",
        "convolution",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_mm",
        "cudnn_convolution",
        "linear",
    ],
)
def test_every_library_op_is_forbidden(op):
    out, _ = _cuda([["own_kernel", 10.0]], ops={op: [1, 0.0]})
    assert out["library_ops"][0] == "fail"


@pytest.mark.parametrize(
    "name", ["gemm_bias_relu_kernel", "gemv_fp8_kernel", "my_gemm", "flashlike_softmax", "conv_tile_kernel"]
)
def test_own_kernels_named_like_the_work_they_do_are_not_library_kernels(name):
    out, _ = _cuda([[name, 10.0]])
    assert out["library_ops"][0] == "pass" and out["custom_kernel"][0] == "pass", out


def test_torch_compile_and_inductor_kernels_are_library_work():
    out, _ = _cuda([["triton_poi_fused_gelu_0", 10.0]], compiled=1)
    assert out["library_ops"][0] == "fail" and "torch.compile" in out["library_ops"][1]
    assert out["custom_kernel"][0] == "fail"  # an Inductor kernel is not the solution's own


def test_no_profiler_proves_nothing_and_fails_closed():
    out, _ = _cuda(None, profiler=False)
    assert out["custom_kernel"][0] == "fail" and "profiler could not run" in out["custom_kernel"][1]


def test_a_kernel_the_reference_launches_is_not_the_solutions_own():
    out, _ = _cuda([["elementwise_kernel_x", 10.0]], reference_kernels=["elementwise_kernel_x"])
    assert out["custom_kernel"][0] == "fail"


def test_the_v3_rule_only_asks_that_an_own_kernel_ran_and_relaxed_fails_nothing():
    out, _ = _cuda([[CUBLAS, 60.0], ["epilogue_kernel", 40.0]], ops={"mm": [1, 0.0]}, rule="v3")
    assert out == {"custom_kernel": ("pass", "own device kernels: ['epilogue_kernel']")}
    out, facts = _cuda([[CUBLAS, 60.0]], ops={"mm": [1, 0.0]}, rule="relaxed")
    assert out["custom_kernel"][0] == "skip" and facts["library_ops"]


def test_cpu_needs_a_completed_launch_with_a_non_empty_grid():
    assert _cpu([["softmax_kernel", 4]])[0]["custom_kernel"][0] == "pass"
    empty, _ = _cpu([["softmax_kernel", 0]])
    assert empty["custom_kernel"][0] == "fail" and "no custom kernel" in empty["custom_kernel"][1]
    raised, _ = _cpu([], failed=["softmax_kernel"])
    assert raised["custom_kernel"][0] == "fail" and "failed: ['softmax_kernel']" in raised["custom_kernel"][1]


def test_the_references_own_compute_op_fails_library_ops_at_any_share():
    # torch.softmax does the work beside a copy kernel: the share does not matter.
    token, facts = _cpu([["copy_kernel", 4]], ops={"_softmax": [1, 0.001], "empty_like": [1, 0.0]})
    assert token["library_ops"][0] == "fail" and "_softmax" in token["library_ops"][1]
    cuda, _ = _cuda(
        [["copy_kernel", 13.0], ["void at::native::cunn_SoftMaxForward<4>", 1.0]],
        ops={"_softmax": [1, 0.0]},
        reference_ops=SOFTMAX_REF_OPS,
    )
    assert cuda["library_ops"][0] == "fail"
    # Allocation, views and copies are never the reference's compute.
    only_data, _ = _cpu([["k", 1]], ops={"copy_": [1, 0.0]}, reference_ops={"copy_": [1, 1.0], "_softmax": [1, 0.0]})
    assert only_data["library_ops"][0] == "pass"


def _cpu_timed(outside_s, program_s=0.01, dot_flops=0.0, reference_ops=SOFTMAX_REF_OPS, flops=0.0, calls=1):
    evidence = {
        "ops": {"empty_like": [1, 0.0]},
        "programs": [["kernel", 4]],
        "failed_launches": [],
        "compiled_frames": 0,
        "forward_seconds": (outside_s + program_s) * calls,
        "program_seconds": program_s * calls,
        "dot_flops": dot_flops * calls,
        "calls": calls,
    }
    return kernel_rule.judge_kernel_evidence(
        evidence,
        device="cpu",
        rule="strict",
        reference_ops=reference_ops,
        reference_kernels=[],
        reference_matmul_flops=flops,
    )


def test_cpu_main_work_is_work_done_inside_the_solutions_programs():
    reference_s = sum(v[1] for k, v in SOFTMAX_REF_OPS.items() if k not in kernel_rule.DATA_OPS)
    honest, facts = _cpu_timed(outside_s=0.0001)
    assert honest["main_work"][0] == "pass" and facts["outside_programs_s"] == pytest.approx(0.0001)
    # numpy (or any work outside the programs) comparable to the whole reference fails.
    outside, _ = _cpu_timed(outside_s=reference_s + kernel_rule.CPU_OUTSIDE_SLACK_S + 0.001)
    assert outside["main_work"][0] == "fail" and "outside its Triton programs" in outside["main_work"][1]
    # A window's evidence covers several calls: the figures are per call.
    window, _ = _cpu_timed(outside_s=0.0001, calls=8)
    assert window["main_work"][0] == "pass"


def test_cpu_main_work_of_a_matrix_product_needs_the_programs_dots():
    gemm = dict(GEMM_REF_OPS)
    none, _ = _cpu_timed(outside_s=0.0, reference_ops=gemm, flops=2e6, dot_flops=0.0)
    assert none["main_work"][0] == "fail" and "tl.dot" in none["main_work"][1]
    enough, _ = _cpu_timed(outside_s=0.0, reference_ops=gemm, flops=2e6, dot_flops=2e6)
    assert enough["main_work"][0] == "pass"


def test_samples_that_disagree_fail_and_cpu_main_work_takes_the_median_sample():
    honest = {"ops": {}, "programs": [["k", 4]], "failed_launches": [], "compiled_frames": 0}
    stub = {"ops": {}, "programs": [["k", 0]], "failed_launches": [], "compiled_frames": 0}
    context = dict(device="cpu", rule="strict", reference_ops=SOFTMAX_REF_OPS, reference_kernels=[])
    checks, facts = kernel_rule.judge_samples([("case a", honest), ("case b", stub)], **context)
    assert checks["custom_kernel"][0] == "fail" and "disagree" in checks["custom_kernel"][1]
    loaded = dict(honest, forward_seconds=1.0, program_seconds=0.0)
    calm = dict(honest, forward_seconds=0.0001, program_seconds=0.0)
    checks, _ = kernel_rule.judge_samples([("case a", loaded), ("case b", calm)], **context)
    assert checks["main_work"][0] == "pass", checks  # one stretched sample of two: the calm one speaks
    # Work outside the programs in every timed call, honest cases: the timed calls outnumber them.
    timed = [(f"timed call {i}", loaded) for i in range(5)]
    checks, _ = kernel_rule.judge_samples([("case a", calm), ("case b", calm), *timed], **context)
    assert checks["main_work"][0] == "fail", checks


def test_the_op_recorder_sees_the_ops_a_forward_dispatches():
    import torch

    recorder = OpRecorder()
    with recorder:
        x = torch.randn(4, 8)
        torch.softmax(x @ x.t(), dim=1)
    summary = recorder.summary()
    assert "mm" in summary and "_softmax" in summary and summary["mm"][0] == 1
    assert kernel_rule.forbidden_ops(summary) == ["mm"]
