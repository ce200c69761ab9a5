"""Roofline figures: FLOPs and minimal bytes per problem, and the speed-of-light time on a GPU.

`DEFAULT_ROOFLINE` holds (flops, min_bytes) for the 60 problems at their default shapes, from
`shared/problem-spec.md` (part 1 summary table for level1/level2; the per-problem formulas of
part 2 for the rest). Conventions, as in the spec: a multiply-add is 2 FLOPs (GEMM 2*M*N*K,
convolution 2*(C_in/groups)*prod(kernel) per output element), attention score and PV products are
counted dense (causal masks do not halve them), elementwise work is nominal; minimal bytes read
every input, parameter and buffer once and write the output once, at the dtypes the reference uses.

`estimate_roofline(model, inputs)` is the generic fallback for problems outside the table (a
user's own folder): matmul / conv / attention FLOPs from `torch.utils.flop_counter`, and the same
minimal-bytes rule. It runs on meta tensors, so default shapes cost no memory.

torch is imported only by the functions that take tensors or dtypes, so the runs analysis
(table look-ups and speed of light from precision names) starts without it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..vocab import PRECISIONS
from .gpus import GpuSpec, get_gpu

if TYPE_CHECKING:
    import torch
    import torch.nn as nn

# problem_id -> (flops, min_bytes) at default shapes.
DEFAULT_ROOFLINE: dict[str, tuple[int, int]] = {
    # level1 (spec part 1, section 2; fp32)
    "level1/1_Square_matrix_multiplication_": (17_179_869_184, 50_331_648),
    "level1/2_Standard_matrix_multiplication_": (17_179_869_184, 58_720_256),
    "level1/3_Batched_matrix_multiplication": (4_294_967_296, 117_440_512),
    "level1/4_Matrix_vector_multiplication_": (67_108_864, 134_743_040),
    "level1/8_Matmul_with_irregular_shapes_": (286_535_485_890, 360_957_516),
    "level1/9_Tall_skinny_matrix_multiplication_": (8_589_934_592, 1_075_838_976),
    "level1/23_Softmax": (20_971_520, 33_554_432),
    "level1/26_GELU_": (20_971_520, 33_554_432),
    "level1/36_RMSNorm_": (204_472_320, 536_870_912),
    "level1/40_LayerNorm": (536_870_912, 570_425_344),
    "level1/42_Max_Pooling_2D": (100_663_296, 671_088_640),
    "level1/47_Sum_reduction_over_a_dimension": (4_177_920, 16_842_752),
    "level1/63_conv_standard_2D__square_input__square_kernel": (3_567_476_736, 276_847_360),
    "level1/82_conv_depthwise_2D_square_input_square_kernel": (55_741_824, 24_970_092),
    "level1/95_CrossEntropyLoss": (16_789_504, 16_809_988),
    # level2 (spec part 1, section 2; fp32)
    "level2/6_Conv3d_Softmax_MaxPool_MaxPool": (9_614_083_584, 53_289_088),
    "level2/17_Conv2d_InstanceNorm_Divide": (1_023_997_952, 78_649_088),
    "level2/37_Matmul_Swish_Sum_GroupNorm": (4_301_258_752, 71_368_704),
    "level2/40_Matmul_Scaling_ResidualAdd": (4_296_540_160, 71_319_552),
    "level2/46_Conv2d_Subtract_Tanh_Subtract_AvgPool": (974_449_664, 29_100_800),
    "level2/52_Conv2d_Activation_BatchNorm": (990_965_760, 78_649_344),
    "level2/55_Matmul_MaxPool_Sum_Scale": (4_296_015_872, 69_222_912),
    "level2/59_Matmul_Swish_Scaling": (4_297_064_448, 71_319_552),
    "level2/66_Matmul_Dropout_Mean_Softmax": (4_296_036_352, 69_238_784),
    "level2/73_Conv2d_BatchNorm_Scaling": (957_933_568, 78_649_344),
    "level2/82_Conv2d_Tanh_Scaling_BiasAdd_Max": (970_320_640, 29_100_864),
    "level2/85_Conv2d_GroupNorm_Scale_MaxPool_Clamp": (1_077_675_264, 29_100_992),
    "level2/86_Matmul_Divide_GELU": (4_298_637_312, 71_319_552),
    "level2/98_Matmul_AvgPool_GELU_Scale_Max": (4_296_933_248, 69_222_912),
    "level2/99_Matmul_GELU_Softmax": (4_300_734_464, 71_319_552),
    # level3 (matmul terms only; softmax/GELU/LayerNorm elementwise work is left out, as in the spec)
    # 31: in-proj 2*L*B*E*3E + QK^T, PV 2*B*h*L^2*d each + out-proj 2*L*B*E^2 (L=16384, B=2, E=128,
    #     h=4, d=32); bytes 4*(2*2*128*128*128 + 66,304 params)
    "level3/31_VisionAttention": (279_172_874_240, 33_819_648),
    # 43: 2*N*C*3C + 2*N*C^2 + 2*2*B*h*T^2*d (N=32768, C=768, B=64, h=8, T=512, d=96);
    #     bytes 4*(2*64*512*768 + 2,362,368 params), the causal-mask buffer excluded
    "level3/43_MinGPTCausalAttention": (206_158_430_208, 210_776_064),
    # 44: 2*N*768*3072 (attention projections) + 2*2*B*h*T^2*d + 2*2*N*768*3072 (MLP), N=65536;
    #     bytes 4*(2*128*512*768 + 7,087,872 params)
    "level3/44_MiniGPTBlock": (1_030_792_151_040, 431_004_672),
    # level4
    # 1 (intended computation): projections 2*8192*15,335,424 + QK^T 2*4*16*2048^2*192
    #   + PV 2*4*16*2048^2*128; bytes 4*(2*4*2048*2048 + 15,337,472 params)
    "level4/1_DeepSeek_MLA": (423_054_278_656, 195_567_616),
    # 2: routed 2*3*H*I*(N*8) + shared 2*3*N*H*2816 + gate 2*N*H*64 (H=2048, I=1408, N=8192);
    #    bytes 4*(2*4*2048*2048 + 571,080,768 params)
    "level4/2_DeepSeek_MoE": (1_419_486_691_328, 2_418_540_800),
    # 3: q, o 2*8192*4096*4096 each; k, v 2*8192*4096*1024 each; QK^T + PV 2*2*4*32*2048^2*128;
    #    bytes 4*(2*4*2048*4096 + 41,943,040 params)
    "level4/3_GroupedQueryAttention": (962_072_674_304, 436_207_616),
    # 4: 2*16384*4096*4096; x fp16 + weight fp32 + out fp16
    "level4/4_FP8_Matmul": (549_755_813_888, 335_544_320),
    # 5: 6*H*I*(T*k) = 6*4096*14336*16384; x + int64 indices + weights + 8 experts*3*H*I fp32 + out
    "level4/5_MoE_GatedGEMM": (5_772_436_045_824, 5_905_776_640),
    # 6: 2*8192*11008*4096; x fp16 + packed uint8 (N*K/2) + fp16 scales (N*K/128) + out fp16
    "level4/6_INT4_Quantized_GEMM": (738_734_374_912, 270_712_832),
    # 7: five 2048x2048 projections 5*2*8192*2048^2 + a, b projections 2*2*8192*2048*16
    #    + short convolutions 3*2*4*2048*8192 + recurrence 7*(B*T*H)*dk*dv;
    #    bytes 4*(2*4*2048*2048 + 21,068,064 params)
    "level4/7_GatedDeltaNet": (360_106_164_224, 218_489_984),
    # 8: six projections 6*2*8192*2048^2 + b projection 2*8192*2048*16 + convolutions
    #    3*2*4*2048*8192 + recurrence 7*(B*T*H)*dk*dv; bytes 4*(2*4*2048*2048 + 25,231,632 params)
    "level4/8_KimiDeltaAttention": (428_288_770_048, 235_144_256),
    # 9: 2*16384*4096*4096; x fp16 + packed int4 (K*N/2) + fp16 block scales (K*N/32) + out fp16
    "level4/9_FP4_BlockScaled_Matmul": (549_755_813_888, 277_872_640),
    # graphics (nominal elementwise counts, as in the spec)
    # bloom: ~31 FLOP per pixel (direct 5x5 window) * 2*3*1024*1024; in + out fp32
    "graphics/bloom": (195_035_136, 50_331_648),
    # particles: ~20 FLOP per particle * 1,048,576; positions + velocities + dt + gravity + out
    "graphics/particles": (20_971_520, 33_554_444),
    # tile_specialized (GEMM terms exact; epilogues and scale multiplies left out)
    "tile_specialized/gemm_bf16": (17_179_869_184, 25_165_824),
    "tile_specialized/gemm_bias_gelu": (34_359_738_368, 41_951_232),
    "tile_specialized/gemm_bias_relu": (34_359_738_368, 41_951_232),
    "tile_specialized/gemm_bias_silu": (34_359_738_368, 41_951_232),
    "tile_specialized/gemm_fp4": (17_179_869_184, 16_777_224),
    "tile_specialized/gemm_fp8": (17_179_869_184, 16_777_224),
    "tile_specialized/gemm_mixed_fp8_fp16": (17_179_869_184, 20_971_524),
    "tile_specialized/gemm_residual_add": (34_359_738_368, 58_720_256),
    "tile_specialized/gemv_bf16": (3_758_096_384, 118_620_160),
    "tile_specialized/gemv_fp16": (3_758_096_384, 118_620_160),
    "tile_specialized/gemv_fp4": (3_758_096_384, 59_768_840),
    "tile_specialized/gemv_fp8": (3_758_096_384, 59_768_840),
    # 2048 (token, slot) pairs * 2*2*1024*3072; x + int64 indices + weights + experts + out
    "tile_specialized/moe_grouped_gemm": (25_769_803_776, 209_739_776),
    # cutile (fp16 GEMMs)
    "cutile/persistent_gemm": (57_982_058_496, 56_623_104),
    "cutile/stream_k_gemm": (137_438_953_472, 117_440_512),
    "cutile/warp_specialized_gemm": (68_719_476_736, 67_108_864),
}

_FLOAT8_NAMES = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu")
_FLOAT4_NAMES = ("float4_e2m1fn_x2",)


def precision_of(dtype: torch.dtype | str) -> str:
    """The `gpus.PRECISIONS` key for a torch dtype (fp32 maps to plain FP32, not TF32).

    Also accepts a precision key itself ("bf16"). Integer 8-bit storage maps to "int8".
    """
    if isinstance(dtype, str):
        if dtype in PRECISIONS:
            return dtype
        raise ValueError(f"unknown precision {dtype!r}; known: {list(PRECISIONS)}")
    import torch

    if dtype == torch.float32:
        return "fp32"
    if dtype == torch.float16:
        return "fp16"
    if dtype == torch.bfloat16:
        return "bf16"
    if dtype in tuple(getattr(torch, n) for n in _FLOAT8_NAMES if hasattr(torch, n)):
        return "fp8"
    if dtype in tuple(getattr(torch, n) for n in _FLOAT4_NAMES if hasattr(torch, n)):
        return "fp4"
    if dtype in (torch.int8, torch.uint8):
        return "int8"
    raise ValueError(
        f"no roofline precision for {dtype}: float32/float16/bfloat16, float8 and float4 types, "
        "int8 and uint8 are mapped"
    )


def speed_of_light_ms(flops: float, bytes_moved: float, gpu: GpuSpec | str, precision: str | torch.dtype) -> float:
    """Roofline lower bound in milliseconds: max(flops / peak, bytes / bandwidth).

    `gpu` is a GpuSpec or any name `gpus.get_gpu` accepts; `precision` a key such as "bf16" or a
    torch dtype. KeyError if the GPU has no peak for that precision (e.g. fp8 on an RTX 3090).
    """
    spec = get_gpu(gpu)
    peak = spec.peak_flops(precision_of(precision))
    compute_s = flops / peak
    memory_s = bytes_moved / spec.bandwidth_bytes_per_s
    return max(compute_s, memory_s) * 1e3


# The arithmetic each precision's problems may use and still pass the precision check: an fp32
# problem may round its GEMM operands to TF32 (Triton's default for tl.dot; 3xTF32 recovers fp32
# accuracy), so its floor is the tensor-core TF32 peak, not the plain FP32 one.
ALLOWED_ARITHMETIC: dict[str, tuple[str, ...]] = {"fp32": ("fp32", "tf32")}


def fastest_arithmetic(gpu: GpuSpec | str, precision: str | torch.dtype) -> str:
    """The precision key with the highest peak on `gpu` that a `precision` problem may compute in."""
    spec, key = get_gpu(gpu), precision_of(precision)
    allowed = [p for p in ALLOWED_ARITHMETIC.get(key, (key,)) if p in spec.peak_tflops] or [key]
    return max(allowed, key=lambda p: spec.peak_tflops.get(p, 0.0))


def floor_ms(flops: float, bytes_moved: float, gpu: GpuSpec | str, precision: str | torch.dtype) -> float:
    """The speed of light a `precision` problem can never beat: `speed_of_light_ms` at the peak of
    the fastest arithmetic the precision allows (`fastest_arithmetic`)."""
    return speed_of_light_ms(flops, bytes_moved, gpu, fastest_arithmetic(gpu, precision))


def iter_tensors(value: Any) -> Iterable[torch.Tensor]:
    """The tensors among `value` (nested in lists, tuples and dicts)."""
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from iter_tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from iter_tensors(v)


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()  # works for meta tensors too


def estimate_roofline(model: nn.Module, inputs: list[Any] | tuple[Any, ...]) -> tuple[int, int]:
    """(flops, min_bytes) of one forward of `model` on `inputs`, by running it once.

    FLOPs are those `torch.utils.flop_counter.FlopCounterMode` counts: matmuls, convolutions and
    attention kernels (elementwise work is not counted). Minimal bytes = every input tensor,
    parameter and buffer read once + every output tensor written once. Build the model and inputs
    under `torch.device("meta")` to estimate default shapes without allocating; forwards that need
    real data (`.item()`, `nonzero`, data-dependent shapes) cannot run on meta tensors and raise.
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        output = model(*inputs)
    flops = int(counter.get_total_flops())
    state: dict[int, torch.Tensor] = {}
    for t in list(model.parameters()) + list(model.buffers()):
        state[id(t)] = t
    min_bytes = sum(_nbytes(t) for t in state.values())
    min_bytes += sum(_nbytes(t) for t in iter_tensors(list(inputs)))
    min_bytes += sum(_nbytes(t) for t in iter_tensors(output))
    return flops, int(min_bytes)


def roofline_of(problem_id: str, model: nn.Module | None = None, inputs: Any = None) -> tuple[int, int]:
    """The table entry for `problem_id` (valid at default shapes only), else
    `estimate_roofline(model, inputs)`."""
    if problem_id in DEFAULT_ROOFLINE:
        return DEFAULT_ROOFLINE[problem_id]
    if model is None or inputs is None:
        raise KeyError(f"{problem_id!r} is not in DEFAULT_ROOFLINE; pass its model and inputs to estimate it")
    return estimate_roofline(model, inputs)
