"""Static scan of a solution's source: does it contain a custom GPU kernel, or only torch calls?

Owns the markers of custom-kernel code (Triton `@triton.jit`, inline CUDA through
`load_inline`/`cpp_extension`/`__global__` sources, CuPy raw kernels, CUTLASS/CuTe DSL, cuTile,
TileLang, Numba CUDA) and of the torch library calls a kernel-less solution leans on. This reads
text only and never runs the code; the evaluator's runtime proof (evaluate/kernels.py) is the
stronger check where a GPU is at hand. Comments are ignored, so `# could use triton.jit` is
not a kernel, and a Triton kernel that is defined but never launched (`kernel[grid](...)`)
does not count either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# name -> regex of a custom-kernel marker.
KERNEL_MARKERS: dict[str, str] = {
    "triton.jit": r"@\s*(?:triton\.)?jit\b|@\s*triton\.autotune\b|\btriton\.jit\s*\(",
    "load_inline": r"\bload_inline\s*\(|\bcpp_extension\b",
    "cuda source": r"__global__\s+void\b|\bextern\s+\"C\"\s+__global__",
    "cupy raw kernel": r"\bcupy\.(?:RawKernel|RawModule|ElementwiseKernel)\b|\bcp\.RawKernel\b",
    "cutlass": r"\bimport\s+cutlass\b|\bfrom\s+cutlass\b|\bcutlass\.cute\b|@\s*cute\.(?:kernel|jit)\b",
    "cutile": r"\bcuda\.tile\b|@\s*ct\.kernel\b",
    "tilelang": r"\bimport\s+tilelang\b|\bfrom\s+tilelang\b",
    "numba cuda": r"@\s*(?:numba\.)?cuda\.jit\b",
    "jiterator": r"\bjiterator\b",
}
_KERNEL_RE = {name: re.compile(pattern) for name, pattern in KERNEL_MARKERS.items()}
# Literal text each marker needs; a plain `in` test skips most regex searches (3-10x faster).
_HINTS = {
    "triton.jit": ("jit", "autotune"),
    "load_inline": ("load_inline", "cpp_extension"),
    "cuda source": ("__global__",),
    "cupy raw kernel": ("Raw", "ElementwiseKernel"),
    "cutlass": ("cutlass", "cute"),
    "cutile": ("cuda.tile", "ct.kernel"),
    "tilelang": ("tilelang",),
    "numba cuda": ("cuda.jit",),
    "jiterator": ("jiterator",),
}
_ANY_KERNEL = re.compile("|".join(f"(?:{p})" for p in KERNEL_MARKERS.values()))

# Library calls a solution without kernels typically consists of (shown as evidence).
TORCH_CALLS = re.compile(
    r"\b(?:torch\.nn\.functional|F|torch|torch\.ops\.aten)\."
    r"(matmul|mm|bmm|addmm|baddbmm|einsum|linear|conv[123]d|scaled_dot_product_attention|_scaled_mm|"
    r"layer_norm|rms_norm|group_norm|instance_norm|batch_norm|softmax|log_softmax|cross_entropy|gelu|"
    r"silu|max_pool[123]d|avg_pool[123]d|compile|sum|mean|amax)\s*\("
)
_TRITON_DEF = re.compile(r"@\s*(?:triton\.)?(?:jit|autotune)\b[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+(\w+)")


@dataclass(frozen=True)
class KernelScan:
    """What the static scan found. `has_custom_kernel` is the verdict; `reason` says why."""

    has_custom_kernel: bool
    markers: tuple[str, ...]
    torch_calls: tuple[str, ...]
    reason: str


# A string literal (kept: it may hold CUDA source) or a `#` comment (dropped). One C-level regex
# pass; tokenize is ~10x slower and gives up on sources that do not parse.
_STRING_OR_COMMENT = re.compile(
    r"(\"\"\"[\s\S]*?\"\"\"|'\'\'[\s\S]*?'\'\'|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*')|(#[^\n]*)"
)


def strip_comments(source: str) -> str:
    """The source without `#` comments; strings, which may hold CUDA code, are kept."""
    return _STRING_OR_COMMENT.sub(lambda m: m.group(1) or "", source)


@lru_cache(maxsize=8192)
def scan_source(source: str) -> KernelScan:
    """Scan one solution source (cached by content)."""
    calls = tuple(sorted(set(TORCH_CALLS.findall(source))))
    if not _ANY_KERNEL.search(source):  # fast path: no marker anywhere, comments included
        return KernelScan(False, (), calls, _no_kernel_reason(calls))
    code = strip_comments(source)
    markers = tuple(name for name, rx in _KERNEL_RE.items() if any(h in code for h in _HINTS[name]) and rx.search(code))
    calls = tuple(sorted(set(TORCH_CALLS.findall(code))))
    if not markers:
        return KernelScan(False, (), calls, "kernel markers appear only in comments; " + _no_kernel_reason(calls))
    if markers == ("triton.jit",):
        names = _TRITON_DEF.findall(code)
        launched = [n for n in names if re.search(rf"\b{re.escape(n)}\s*\[", code)]
        if names and not launched:
            return KernelScan(
                False,
                markers,
                calls,
                f"defines Triton kernel(s) {', '.join(names)} but never launches them "
                f"(no `{names[0]}[grid](...)`); " + _no_kernel_reason(calls),
            )
    return KernelScan(True, markers, calls, "custom kernel: " + ", ".join(markers))


def _no_kernel_reason(calls: tuple[str, ...]) -> str:
    if calls:
        return "no custom kernel; only torch library calls (" + ", ".join(calls[:6]) + ")"
    return "no custom kernel (no Triton, CUDA, CUTLASS or cuTile code)"
