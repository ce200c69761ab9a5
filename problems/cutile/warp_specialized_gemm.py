"""fp16 GEMM, C = A @ B, posed as a warp-specialized workload for the cuTile (cuda.tile) API:
within one kernel, producer warps stage A/B tiles while consumer warp groups run the MMAs."""

import torch
import torch.nn as nn

# Illustration only: nothing imports or runs this string.
CUTILE_REFERENCE_SNIPPET = """
import cuda.tile as ct

ConstInt = ct.Constant[int]


@ct.kernel
def warp_specialized_kernel(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    row, col = ct.bid(0), ct.bid(1)
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for kk in range(ct.cdiv(A.shape[1], tk)):
        # producer warps would stage these tiles; consumer warps would issue the MMA
        a_t = ct.load(A, index=(row, kk), shape=(tm, tk), padding_mode=ct.PaddingMode.ZERO)
        b_t = ct.load(B, index=(kk, col), shape=(tk, tn), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a_t, b_t, acc)
    ct.store(C, index=(row, col), tile=acc.astype(C.dtype))
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
n = 4096
k = 2048

REDUCED_SIZES = {"m": 64, "n": 64, "k": 128}


def get_inputs():
    a = torch.randn(m, k, dtype=torch.float16)
    b = torch.randn(k, n, dtype=torch.float16)
    return [a, b]


def get_init_inputs():
    return []
