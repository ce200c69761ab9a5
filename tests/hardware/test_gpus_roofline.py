"""GPU table, roofline table, speed of light and the generic estimator (fast, offline, CPU)."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
import torch

from kernelbench_v3.catalog.materialize import load_module
from kernelbench_v3.catalog.problem import discover, get_problem
from kernelbench_v3.hardware.gpus import GPUS, get_gpu
from kernelbench_v3.hardware.roofline import (
    DEFAULT_ROOFLINE,
    estimate_roofline,
    precision_of,
    roofline_of,
    speed_of_light_ms,
)
from kernelbench_v3.vocab import PRECISIONS

# --------------------------------------------------------------------------- GPU table


def test_gpu_table_has_the_splits_and_h200():
    assert set(GPUS) == {"rtx3090", "h100", "b200", "h200"}
    for key, spec in GPUS.items():
        assert spec.key == key
        assert set(spec.peak_tflops) <= set(PRECISIONS)
        assert {"fp32", "fp16", "bf16", "int8"} <= set(spec.peak_tflops)
        assert all(v > 0 for v in spec.peak_tflops.values())
        for fact in (
            "compute_capability",
            "sm_count",
            "memory_gb",
            "memory_bandwidth_gbs",
            "l2_cache_mb",
            "peak_tflops",
            "architecture",
        ):
            assert spec.sources.get(fact), f"{key}: no source for {fact}"


def test_gpu_facts_that_decide_rooflines():
    assert "fp8" not in GPUS["rtx3090"].peak_tflops  # Ampere: no FP8 tensor cores
    assert "fp4" not in GPUS["h100"].peak_tflops and "fp4" in GPUS["b200"].peak_tflops
    assert GPUS["h100"].compute_capability == (9, 0)
    assert GPUS["b200"].compute_capability == (10, 0)
    assert GPUS["rtx3090"].compute_capability == (8, 6)
    # Dense, not sparse: H100 SXM bf16 is 989.4 (1979 is the 2:4-sparse figure).
    assert GPUS["h100"].peak_tflops["bf16"] == pytest.approx(989.4)
    assert GPUS["b200"].peak_tflops["fp8"] == pytest.approx(4500.0)


def test_gpu_spec_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        GPUS["h100"].sm_count = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        GPUS["h100"].peak_tflops["bf16"] = 1.0  # type: ignore[index]
    assert isinstance(hash(GPUS["b200"]), int)


@pytest.mark.parametrize(
    "name, key",
    [
        ("RTX3090", "rtx3090"),
        ("rtx3090", "rtx3090"),
        ("H100", "h100"),
        ("h100", "h100"),
        ("B200", "b200"),
        ("b200", "b200"),
        ("h200", "h200"),
        ("NVIDIA GeForce RTX 3090", "rtx3090"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("rtx 3090", "rtx3090"),
    ],
)
def test_get_gpu_spellings(name, key):
    assert get_gpu(name) is GPUS[key]


def test_get_gpu_unknown_lists_valid_names():
    with pytest.raises(KeyError) as exc:
        get_gpu("A100")
    message = str(exc.value)
    for valid in ("rtx3090", "RTX3090", "h100", "H100", "b200", "B200"):
        assert valid in message


def test_peak_flops_missing_precision_is_clear():
    with pytest.raises(KeyError, match="fp8"):
        GPUS["rtx3090"].peak_flops("fp8")


# --------------------------------------------------------------------------- roofline table

FOLDER_COUNTS = {
    "level1": 15,
    "level2": 15,
    "level3": 3,
    "level4": 9,
    "graphics": 2,
    "tile_specialized": 13,
    "cutile": 3,
}


def test_table_covers_the_60_problems():
    assert len(DEFAULT_ROOFLINE) == 60
    assert Counter(pid.split("/")[0] for pid in DEFAULT_ROOFLINE) == FOLDER_COUNTS
    for pid, (flops, nbytes) in DEFAULT_ROOFLINE.items():
        assert isinstance(flops, int) and isinstance(nbytes, int) and flops > 0 and nbytes > 0, pid
    assert {p.problem_id for p in discover()} == set(DEFAULT_ROOFLINE)


def test_table_spot_values_from_spec():
    assert DEFAULT_ROOFLINE["level1/1_Square_matrix_multiplication_"] == (2 * 2048**3, 3 * 2048**2 * 4)
    assert DEFAULT_ROOFLINE["cutile/stream_k_gemm"][0] == 2 * 4096 * 2048 * 8192
    assert DEFAULT_ROOFLINE["tile_specialized/gemv_fp8"][1] == 14336 * 4096 + 32 * 4096 + 8 + 32 * 14336 * 2


# --------------------------------------------------------------------------- precision_of / speed of light


@pytest.mark.parametrize(
    "dtype, key",
    [
        (torch.float32, "fp32"),
        (torch.float16, "fp16"),
        (torch.bfloat16, "bf16"),
        (torch.float8_e4m3fn, "fp8"),
        (torch.float8_e5m2, "fp8"),
        (torch.int8, "int8"),
        (torch.uint8, "int8"),
        ("tf32", "tf32"),
    ],
)
def test_precision_of(dtype, key):
    assert precision_of(dtype) == key


def test_precision_of_rejects_unmapped():
    with pytest.raises(ValueError):
        precision_of(torch.int64)


def test_speed_of_light_compute_bound_by_hand():
    # 4096^3 bf16 GEMM on H100: 137,438,953,472 FLOP / 989.4e12 = 0.138911 ms;
    # 100,663,296 B / 3350e9 = 0.030049 ms -> compute-bound.
    ms = speed_of_light_ms(2 * 4096**3, 3 * 4096**2 * 2, "H100", "bf16")
    assert ms == pytest.approx(0.1389113, rel=1e-6)


def test_speed_of_light_memory_bound_by_hand():
    # gemv_bf16 on RTX 3090: 118,620,160 B / 936e9 = 0.1267309 ms;
    # 3,758,096,384 FLOP / 71e12 = 0.052931 ms -> memory-bound.
    ms = speed_of_light_ms(3_758_096_384, 118_620_160, "rtx3090", torch.bfloat16)
    assert ms == pytest.approx(0.1267309, rel=1e-6)


def test_speed_of_light_takes_spec_and_rejects_missing_precision():
    assert speed_of_light_ms(9e12, 0, GPUS["b200"], "fp4") == pytest.approx(1.0)  # 9 PFLOP/s dense
    with pytest.raises(KeyError):
        speed_of_light_ms(1e9, 1e6, "RTX3090", torch.float8_e4m3fn)


# --------------------------------------------------------------------------- estimator


def _gemm_dims(problem_id: str, sizes: dict) -> tuple[int, int, int, int, int]:
    """(M, N, K, bytes of A, B) for the pure GEMM problems; C bytes come from the output."""
    if problem_id == "level1/1_Square_matrix_multiplication_":
        n = sizes["N"]
        return n, n, n, 4, 4
    if problem_id == "level1/2_Standard_matrix_multiplication_":
        return sizes["M"], sizes["N"], sizes["K"], 4, 4
    if problem_id in (
        "tile_specialized/gemm_bf16",
        "cutile/persistent_gemm",
        "cutile/stream_k_gemm",
        "cutile/warp_specialized_gemm",
    ):
        return sizes["m"], sizes["n"], sizes["k"], 2, 2
    raise AssertionError(problem_id)


PURE_GEMMS = [
    "level1/1_Square_matrix_multiplication_",
    "level1/2_Standard_matrix_multiplication_",
    "tile_specialized/gemm_bf16",
    "cutile/persistent_gemm",
    "cutile/stream_k_gemm",
    "cutile/warp_specialized_gemm",
]


@pytest.mark.parametrize("problem_id", PURE_GEMMS)
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_estimator_matches_gemm_formula_at_reduced_sizes(problem_id, device):
    problem = get_problem(problem_id)
    sizes = {**problem.sizes, **problem.reduced}
    module = load_module(problem, problem.reduced)
    with torch.device(device):
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs()).eval()
        inputs = module.get_inputs()
        flops, nbytes = estimate_roofline(model, inputs)
    m, n, k, a_size, b_size = _gemm_dims(problem_id, sizes)
    out_size = a_size  # same dtype in and out for these problems
    assert flops == 2 * m * n * k
    assert nbytes == m * k * a_size + k * n * b_size + m * n * out_size


@pytest.mark.parametrize(
    "problem_id",
    [
        "tile_specialized/gemm_bias_relu",
        "tile_specialized/gemm_fp8",
        "tile_specialized/gemm_mixed_fp8_fp16",
        "tile_specialized/gemv_fp4",
        "tile_specialized/gemv_bf16",
        "cutile/warp_specialized_gemm",
        "level1/1_Square_matrix_multiplication_",
    ],
)
def test_estimator_reproduces_table_at_default_shapes_on_meta(problem_id):
    module = load_module(get_problem(problem_id))
    with torch.device("meta"):
        model = module.Model(*module.get_init_inputs()).eval()
        inputs = module.get_inputs()
        estimate = estimate_roofline(model, inputs)
    assert estimate == DEFAULT_ROOFLINE[problem_id]


def test_estimator_counts_parameters_once_and_conv_flops():
    conv = torch.nn.Conv2d(3, 8, 3, bias=False)
    with torch.device("meta"):
        conv = conv.to("meta")
        x = torch.empty(2, 3, 10, 10)
        flops, nbytes = estimate_roofline(conv, [x])
    out_elems = 2 * 8 * 8 * 8
    assert flops == 2 * 3 * 9 * out_elems
    assert nbytes == 4 * (2 * 3 * 10 * 10 + 8 * 3 * 9 + out_elems)


def test_roofline_of_falls_back_to_estimator():
    assert roofline_of("cutile/stream_k_gemm") == DEFAULT_ROOFLINE["cutile/stream_k_gemm"]
    lin = torch.nn.Linear(16, 8, bias=False)
    x = torch.randn(4, 16)
    assert roofline_of("mine/linear", lin, [x]) == (2 * 4 * 16 * 8, 4 * (4 * 16 + 16 * 8 + 4 * 8))
    with pytest.raises(KeyError):
        roofline_of("mine/linear")


def test_the_h200_is_derived_from_the_h100():
    """Issue 33, item 7: the H200 record is the H100's with its own memory, not a second copy of
    every figure; gpus.py writes one GpuSpec per distinct GPU."""
    import ast
    import inspect

    from kernelbench_v3.hardware import gpus

    h100, h200 = GPUS["h100"], GPUS["h200"]
    assert (h200.memory_gb, h200.memory_bandwidth_gbs, h200.sku) == (141.0, 4800.0, "H200")
    for name in ("architecture", "compute_capability", "sm_count", "l2_cache_mb", "peak_tflops"):
        assert getattr(h200, name) == getattr(h100, name), name
    assert h200.sources["memory_gb"] != h100.sources["memory_gb"]  # each figure cites its own datasheet
    calls = [
        node
        for node in ast.walk(ast.parse(inspect.getsource(gpus)))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "GpuSpec"
    ]
    keys = sorted(kw.value.value for call in calls for kw in call.keywords if kw.arg == "key")
    assert keys == ["b200", "h100", "rtx3090"], keys
    assert list(GPUS) == ["rtx3090", "h100", "h200", "b200"]
