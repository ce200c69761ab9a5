"""Which device kernels are library code, the custom-kernel time share, and profiled device time."""

from __future__ import annotations

import pytest

from kernelbench_v3.evaluate import kernels


def test_library_and_custom_kernel_names():
    library = [
        "void at::native::vectorized_elementwise_kernel<4, float>",
        "sm90_xmma_gemm_f32f32_tf32",
        "ampere_sgemm_128x64_nn",
        "void cutlass::Kernel2<cutlass_80_tensorop>",
        "nvjet_hsh_256x128",
        "triton_poi_fused_add_0",
        "Memcpy DtoD (Device -> Device)",
        "void gemv2T_kernel_val<int, int>",
        "cudnn::winograd::generateWinogradTilesKernel",
        "pytorch_flash::flash_fwd_kernel",
    ]
    custom = ["matmul_kernel", "gemm_kernel", "softmax_kernel", "my_cuda_kernel(float*, int)", "fused_ln_fwd"]
    assert all(kernels.is_library_kernel(n) for n in library)
    assert kernels.custom_kernels(library + custom) == custom
    assert kernels.is_inductor_kernel("triton_red_fused_sum_1") and not kernels.is_inductor_kernel("triton_matmul")


SOLUTION_CUTLASS = (
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
    "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized<4, "
    "cute::tuple<cute::C<1>, cute::C<1>, cute::C<1>>>, cute::bfloat16_t>>>(...)"
)


CUBLAS_HOPPER = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"


CUBLAS_AMPERE = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4::Params)"


ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(...)::{lambda(float)#1}, std::array<char*, 2ul> >(int, ...)"


def test_cutlass_kernels_are_custom_unless_cublas_or_the_reference_launches_them():
    library = [
        CUBLAS_HOPPER,
        CUBLAS_AMPERE,
        ELEMENTWISE,
        "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x128x64_1x1x1_0_tnn_align8",
        "triton_poi_fused_add_mul_0",
        "triton_red_fused__softmax_1",
        "triton_per_fused_native_layer_norm_0",
        "triton_tem_fused_mm_0",
        "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float>::Params)",
        "void cutlass::device_kernel<at::cuda::detail::enable_3x_kernel_for_sm9x<cutlass::gemm::kernel::GemmUniversal<>>>",
    ]
    assert all(kernels.is_library_kernel(n) for n in library), [n for n in library if not kernels.is_library_kernel(n)]
    # Inductor's kernels (torch.compile inside a solution) are not the solution's own.
    assert all(kernels.is_inductor_kernel(n) for n in library[4:8])
    solution = [SOLUTION_CUTLASS, "matmul_kernel", "_fused_epilogue_kernel", "triton_matmul_kernel"]
    assert kernels.custom_kernels(library + solution) == solution
    # The same CUTLASS kernel launched by the reference itself (torch calling CUTLASS) is library.
    assert kernels.custom_kernels(library + solution, reference_names=[SOLUTION_CUTLASS, CUBLAS_HOPPER]) == solution[1:]


def test_custom_kernel_time_fraction_from_profiled_kernel_times():
    # The known hole: the reference's math in PyTorch plus a token Triton kernel.
    token = [(CUBLAS_HOPPER, 950.0), (ELEMENTWISE, 40.0), ("noop_kernel", 2.0), ("Memset (Device)", 8.0)]
    assert kernels.custom_time_fraction(token) == pytest.approx(0.002)
    # cuBLAS for the GEMM, the solution's own fused epilogue: an honest but modest share.
    epilogue = [(CUBLAS_HOPPER, 800.0), ("fused_bias_gelu_kernel", 200.0)]
    assert kernels.custom_time_fraction(epilogue) == pytest.approx(0.2)
    own_cutlass = [(SOLUTION_CUTLASS, 300.0), ("triton_poi_fused_relu_0", 100.0)]
    assert kernels.custom_time_fraction(own_cutlass) == pytest.approx(0.75)
    assert kernels.custom_time_fraction(own_cutlass, reference_names=[SOLUTION_CUTLASS]) == 0.0
    assert kernels.custom_time_fraction([]) is None and kernels.custom_time_fraction([("k", 0.0)]) is None


def test_device_busy_time_counts_overlapping_work_once():
    from kernelbench_v3.evaluate.kernels import union_length

    assert union_length([]) == 0.0
    assert union_length([(0, 10), (5, 15), (20, 30)]) == 25.0  # two streams overlapping, then a gap
    assert union_length([(20, 30), (0, 10), (2, 3), (10, 12)]) == 22.0  # unsorted, nested, touching
    assert union_length([(5, 5), (7, 6)]) == 0.0  # empty or inverted intervals count nothing


class _FakeRange:
    def __init__(self, start: float, end: float):
        self.start, self.end = start, end

    def elapsed_us(self) -> float:
        return self.end - self.start


class _FakeEvent:
    def __init__(self, name: str, device_type: str, start: float, end: float):
        self.name, self.device_type, self.time_range = name, device_type, _FakeRange(start, end)


def _fake_profiler(monkeypatch, events, fail_enter: bool = False):
    import torch.profiler

    class FakeProfile:
        def __init__(self, activities):
            if fail_enter:
                raise RuntimeError("CUPTI unavailable")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def events(self):
            return events

    monkeypatch.setattr(torch.profiler, "profile", FakeProfile)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)


def test_profiled_device_time_per_kernel_name_and_busy_time_per_call(monkeypatch):
    from kernelbench_v3.evaluate import kernels

    events = [
        _FakeEvent("k", "DeviceType.CUDA", 0.0, 10.0),
        _FakeEvent("side", "DeviceType.CUDA", 5.0, 25.0),
        _FakeEvent("k", "DeviceType.CUDA", 30.0, 40.0),
        _FakeEvent("cudaLaunchKernel", "DeviceType.CPU", 0.0, 99.0),
    ]
    _fake_profiler(monkeypatch, events)
    calls = []
    result, times = kernels.profile_cuda(lambda: calls.append(1) or "out")
    assert result == "out" and times == [("k", 20.0), ("side", 20.0)]  # host-side events are not device time
    assert kernels.device_busy_ms(lambda: calls.append(1), calls=2) == pytest.approx(35.0 / 1e3 / 2)
    assert len(calls) == 3


def test_an_unavailable_profiler_gives_no_device_times(monkeypatch):
    from kernelbench_v3.evaluate import kernels

    _fake_profiler(monkeypatch, [], fail_enter=True)
    assert kernels.profile_cuda(lambda: "out") == ("out", None)  # the call still runs, unprofiled
    assert kernels.device_busy_ms(lambda: None, calls=3) is None


def _pattern_literals() -> list[str]:
    """Every regular-expression literal of kernels.py's pattern tuples, as written in the file."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(kernels))
    literals = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and "PATTERN" in t.id for t in targets) and node.value is not None:
                literals += [
                    c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)
                ]
    return literals


def test_each_kernel_pattern_is_written_once():
    """Issue 33, item 7: the forbidden patterns are not a word-for-word copy of part of the
    library list, so a security rule cannot drift from it."""
    literals = _pattern_literals()
    repeated = sorted({p for p in literals if literals.count(p) > 1})
    assert literals and not repeated, f"patterns written more than once in kernels.py: {repeated}"


def test_forbidden_kernels_are_library_kernels():
    assert set(kernels.FORBIDDEN_KERNEL_PATTERNS) <= set(kernels.LIBRARY_KERNEL_PATTERNS)
    for name in ("cublasLt_gemm", "sm90_xmma_gemm_f32", "triton_poi_fused_0", "flash_fwd_kernel", "cudnn_conv"):
        assert kernels.is_forbidden_kernel(name) and kernels.is_library_kernel(name), name
    assert kernels.is_inductor_kernel("triton_red_fused_sum_0") and not kernels.is_inductor_kernel("my_kernel")
    for name in ("void at::native::vectorized_elementwise_kernel<4>", "Memcpy HtoD", "void cub::DeviceReduce"):
        assert kernels.is_library_kernel(name) and not kernels.is_forbidden_kernel(name), name
