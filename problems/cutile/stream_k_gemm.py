"""fp16 GEMM, C = A @ B, posed as a Stream-K / split-K workload for the cuTile (cuda.tile) API:
block ids select an output tile and a slice of the K loop, each slice writes a partial fp32
accumulator, and a reduction over the slices produces C. The K dimension is the long one here."""

import torch
import torch.nn as nn

# Illustration only: nothing imports or runs this string.
CUTILE_REFERENCE_SNIPPET = """
import cuda.tile as ct

ConstInt = ct.Constant[int]


@ct.kernel
def stream_k_kernel(A, B, partials, tm: ConstInt, tn: ConstInt, tk: ConstInt, split_k: ConstInt):
    row, col, part = ct.bid(0), ct.bid(1), ct.bid(2)
    k_tiles = ct.cdiv(A.shape[1], tk)
    per_split = ct.cdiv(k_tiles, split_k)
    k_begin = part * per_split
    k_end = min(k_tiles, k_begin + per_split)
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for kk in range(k_begin, k_end):
        a_t = ct.load(A, index=(row, kk), shape=(tm, tk), padding_mode=ct.PaddingMode.ZERO)
        b_t = ct.load(B, index=(kk, col), shape=(tk, tn), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a_t, b_t, acc)
    ct.store(partials, index=(part, row, col), tile=acc.astype(partials.dtype))
    # a second pass (not shown) sums partials over the split axis into C
"""


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a @ b


OP_TYPE = "gemm"
SUPPORTED_PRECISIONS = ["fp16", "bf16"]
HARDWARE_REQUIRED = ["B200"]
CUTILE_LEVEL = 1

m = 4096
n = 2048
k = 8192

REDUCED_SIZES = {"m": 64, "n": 32, "k": 256}


def get_inputs():
    a = torch.randn(m, k, dtype=torch.float16)
    b = torch.randn(k, n, dtype=torch.float16)
    return [a, b]


def get_init_inputs():
    return []
