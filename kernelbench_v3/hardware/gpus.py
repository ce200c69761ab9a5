"""Facts about the GPUs of the three splits (rtx3090, h100, b200) and the H200 the project
measures on: one table, one record per GPU, each figure with the document it comes from.

Peak throughputs are **dense** (no 2:4 structured sparsity), in TFLOP/s (TOP/s for int8), at the
vendor's boost clock. Where a datasheet prints only the sparse figure it is halved, and the source
says so. `fp32` is the non-tensor-core FP32 rate (what a PyTorch fp32 matmul gets, since
`allow_tf32` is off by default); `tf32` is the tensor-core TF32 rate. `fp16` and `bf16` are
tensor-core rates with FP32 accumulation (what PyTorch uses). A precision a GPU has no tensor-core
path for (fp8 on the RTX 3090, fp4 before Blackwell) is absent from its `peak_tflops`.

Units: memory in GB (10^9 B, as vendors print it), bandwidth in GB/s, L2 in MB as vendors print
it (NVIDIA's "MB" for caches is MiB-based; the figures are not converted).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ..vocab import PRECISIONS


@dataclass(frozen=True)
class GpuSpec:
    """One GPU's facts. `peak_tflops` maps a precision key of `PRECISIONS` to a dense peak."""

    key: str  # split / table name: "rtx3090", "h100", "b200", "h200"
    name: str  # product name
    sku: str  # spelling used by the runs dataset / HARDWARE_REQUIRED
    architecture: str
    compute_capability: tuple[int, int]
    sm_count: int
    memory_gb: float
    memory_bandwidth_gbs: float
    l2_cache_mb: float
    peak_tflops: Mapping[str, float]
    sources: Mapping[str, str] = field(compare=False)
    notes: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        unknown = set(self.peak_tflops) - set(PRECISIONS)
        if unknown:
            raise ValueError(f"{self.key}: unknown precision keys {sorted(unknown)}")
        object.__setattr__(self, "peak_tflops", MappingProxyType(dict(self.peak_tflops)))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    def __hash__(self) -> int:  # the mapping fields are not hashable; the key identifies a GPU
        return hash(self.key)

    @property
    def precisions(self) -> tuple[str, ...]:
        """The precisions this GPU has a peak for, in `PRECISIONS` order."""
        return tuple(p for p in PRECISIONS if p in self.peak_tflops)

    def peak_flops(self, precision: str) -> float:
        """Dense peak in FLOP/s (not TFLOP/s) for `precision`; KeyError naming the valid ones."""
        try:
            return self.peak_tflops[precision] * 1e12
        except KeyError:
            raise KeyError(
                f"{self.name} has no {precision!r} peak (no tensor-core path for it); "
                f"known precisions: {list(self.precisions)}"
            ) from None

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.memory_bandwidth_gbs * 1e9


_GA102 = "NVIDIA Ampere GA102 GPU Architecture whitepaper (v2.1), GeForce RTX 3090 column"
_H100 = "NVIDIA H100 Tensor Core GPU Architecture whitepaper (Hopper), H100 SXM5 column"
_H100_DS = "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column (sparse figures halved)"
_H200_DS = "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column (sparse figures halved)"
_HGX_B200 = "NVIDIA HGX B200 datasheet, per-GPU figures (8-GPU totals / 8; sparse figures halved)"
_BW_TUNING = "NVIDIA Blackwell Tuning Guide (CUDA docs): B200, compute capability 10.0, 126 MB L2"

_H100_SXM5 = GpuSpec(
    key="h100",
    name="NVIDIA H100 SXM5 80GB",
    sku="H100",
    architecture="Hopper (GH100)",
    compute_capability=(9, 0),
    sm_count=132,
    memory_gb=80.0,
    memory_bandwidth_gbs=3350.0,
    l2_cache_mb=50.0,
    peak_tflops={
        "fp32": 67.0,
        "tf32": 494.7,
        "fp16": 989.4,
        "bf16": 989.4,
        "fp8": 1978.9,
        "int8": 1978.9,
    },
    sources={
        "architecture": _H100,
        "compute_capability": "CUDA C++ Programming Guide, compute capabilities table (H100 = 9.0)",
        "sm_count": _H100 + " (132 SMs)",
        "memory_gb": _H100_DS + " (80 GB HBM3)",
        "memory_bandwidth_gbs": _H100_DS + " (3.35 TB/s)",
        "l2_cache_mb": _H100 + " (50 MB L2)",
        "peak_tflops": _H100 + " (dense figures; FP32 67 per " + _H100_DS + ")",
    },
    notes=(
        "The benchmark's H100 target does not state the form factor; the SXM5 part is assumed. "
        "H100 PCIe: 114 SMs, 2.0 TB/s, FP16/BF16 756 dense."
    ),
)


def _h200_from(h100: GpuSpec) -> GpuSpec:
    """The H200 SXM is the H100 SXM5's GH100 with more and faster memory (HBM3e): every other
    figure is the H100's, so it is derived from that record rather than copied, and the two cannot
    drift apart. The datasheet's peaks match the H100's (TF32 989, FP16/BF16 1979, FP8/INT8 3958
    sparse, halved here)."""
    return dataclasses.replace(
        h100,
        key="h200",
        name="NVIDIA H200 SXM 141GB",
        sku="H200",
        memory_gb=141.0,
        memory_bandwidth_gbs=4800.0,
        sources={
            **h100.sources,
            "architecture": _H200_DS,
            "compute_capability": "CUDA C++ Programming Guide, compute capabilities table (Hopper = 9.0)",
            "sm_count": _H100 + " (same GH100 configuration as H100 SXM5: 132 SMs)",
            "memory_gb": _H200_DS + " (141 GB HBM3e)",
            "memory_bandwidth_gbs": _H200_DS + " (4.8 TB/s)",
            "l2_cache_mb": _H100 + " (same GH100 L2 as H100 SXM5: 50 MB)",
            "peak_tflops": _H200_DS + " (TF32 989, FP16/BF16 1979, FP8/INT8 3958 sparse -> halved; "
            "dense values as in " + _H100 + ")",
        },
        notes="Not a benchmark split: the project's own measurements run on an H200.",
    )


GPUS: dict[str, GpuSpec] = {
    "rtx3090": GpuSpec(
        key="rtx3090",
        name="NVIDIA GeForce RTX 3090",
        sku="RTX3090",
        architecture="Ampere (GA102)",
        compute_capability=(8, 6),
        sm_count=82,
        memory_gb=24.0,
        memory_bandwidth_gbs=936.0,
        l2_cache_mb=6.0,
        peak_tflops={"fp32": 35.6, "tf32": 35.6, "fp16": 71.0, "bf16": 71.0, "int8": 284.0},
        sources={
            "architecture": _GA102,
            "compute_capability": "CUDA C++ Programming Guide, compute capabilities table (GA10x = 8.6)",
            "sm_count": _GA102,
            "memory_gb": _GA102 + " (24 GB GDDR6X)",
            "memory_bandwidth_gbs": _GA102 + " (19.5 Gbps x 384-bit = 936 GB/s)",
            "l2_cache_mb": _GA102 + " (6144 KB L2)",
            "peak_tflops": _GA102 + " (dense column; FP16/BF16 with FP32 accumulate)",
        },
        notes=(
            "FP16 tensor rate with FP16 accumulate is 142 TFLOP/s; GeForce runs FP32-accumulate "
            "at half that. No FP8 or FP4 tensor cores. INT4 tensor: 568 TOP/s."
        ),
    ),
    "h100": _H100_SXM5,
    "h200": _h200_from(_H100_SXM5),
    "b200": GpuSpec(
        key="b200",
        name="NVIDIA B200",
        sku="B200",
        architecture="Blackwell (GB100, two dies)",
        compute_capability=(10, 0),
        sm_count=148,
        memory_gb=192.0,
        memory_bandwidth_gbs=8000.0,
        l2_cache_mb=126.0,
        peak_tflops={
            "fp32": 75.0,
            "tf32": 1125.0,
            "fp16": 2250.0,
            "bf16": 2250.0,
            "fp8": 4500.0,
            "int8": 4500.0,
            "fp4": 9000.0,
        },
        sources={
            "architecture": "NVIDIA Blackwell Architecture Technical Brief",
            "compute_capability": _BW_TUNING,
            "sm_count": _BW_TUNING + "; cudaGetDeviceProperties on a B200 reports 148 SMs",
            "memory_gb": "NVIDIA Blackwell Architecture Technical Brief (B200: 192 GB HBM3e)",
            "memory_bandwidth_gbs": "NVIDIA Blackwell Architecture Technical Brief (B200: 8 TB/s)",
            "l2_cache_mb": _BW_TUNING,
            "peak_tflops": _HGX_B200 + " (FP4 144 PF, FP8 72 PF, INT8 72 POPS, FP16/BF16 36 PF, "
            "TF32 18 PF sparse, FP32 600 TF for 8 GPUs)",
        },
        notes=(
            "HGX/DGX B200 boards expose 180 GB per GPU and the driver-reported memory bus gives "
            "about 7.7 TB/s; the 192 GB / 8 TB/s product figures are used here (192 GB is also "
            "what the benchmark's b200 target declares). The 1200 W GB200 variant is faster."
        ),
    ),
}


def _normalize(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_ALIASES: dict[str, str] = {}
for _key, _spec in GPUS.items():
    for _alias in (_key, _spec.sku, _spec.name, _spec.name.replace("NVIDIA ", "")):
        _ALIASES[_normalize(_alias)] = _key
_ALIASES.update(
    {
        _normalize("GeForce RTX 3090"): "rtx3090",
        _normalize("NVIDIA GeForce RTX 3090"): "rtx3090",
        _normalize("H100 SXM"): "h100",
        _normalize("NVIDIA H100 80GB HBM3"): "h100",  # torch.cuda.get_device_name spelling
        _normalize("H200 SXM"): "h200",
        _normalize("NVIDIA H200"): "h200",
        _normalize("NVIDIA B200"): "b200",
    }
)


def get_gpu(name: str | GpuSpec) -> GpuSpec:
    """A GPU by split name ("h100"), runs-dataset spelling ("H100") or product name
    ("NVIDIA GeForce RTX 3090"), case-insensitively; KeyError lists the valid names."""
    if isinstance(name, GpuSpec):
        return name
    key = _ALIASES.get(_normalize(str(name)))
    if key is None:
        valid = ", ".join(f"{k!r} / {GPUS[k].sku!r}" for k in GPUS)
        raise KeyError(f"unknown GPU {name!r}; valid names (case-insensitive): {valid}")
    return GPUS[key]
