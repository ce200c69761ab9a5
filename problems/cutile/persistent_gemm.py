"""fp16 GEMM, C = A @ B, posed as a persistent-kernel workload for the cuTile (cuda.tile) API:
a fixed grid of blocks loops over output tiles instead of launching one block per tile, with the
kernel written under @ct.kernel and launched with ct.launch on the current torch CUDA stream."""

import torch
import torch.nn as nn

# Illustration only: nothing imports or runs this string.
CUTILE_REFERENCE_SNIPPET = """
import cuda.tile as ct

ConstInt = ct.Constant[int]


@ct.kernel
def persistent_kernel(A, B, C, tm: ConstInt, tn: ConstInt, tk: ConstInt, num_tiles: ConstInt):
    tiles_n = ct.cdiv(B.shape[1], tn)
    k_steps = ct.cdiv(A.shape[1], tk)
    tile = ct.bid(0)
    while tile < num_tiles:                 # each block walks the tiles with stride = grid size
        row, col = tile // tiles_n, tile % tiles_n
        acc = ct.full((tm, tn), 0, dtype=ct.float32)
        for kk in range(k_steps):
            a_t = ct.load(A, index=(row, kk), shape=(tm, tk), padding_mode=ct.PaddingMode.ZERO)
            b_t = ct.load(B, index=(kk, col), shape=(tk, tn), padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(a_t, b_t, acc)
        ct.store(C, index=(row, col), tile=acc.astype(C.dtype))
        tile += ct.num_blocks(0)

# launch: ct.launch(torch.cuda.current_stream(), (num_sms, 1, 1), persistent_kernel,
#                   (A, B, C, 128, 128, 64, num_tiles))
"""


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        # A custom kernel is expected to use persistent blocks; the reference is a plain matmul.
        return a @ b


OP_TYPE = "gemm"
SUPPORTED_PRECISIONS = ["fp16", "bf16"]
HARDWARE_REQUIRED = ["B200"]
CUTILE_LEVEL = 1

m = 3072
n = 3072
k = 3072

REDUCED_SIZES = {"m": 64, "n": 96, "k": 128}


def get_inputs():
    a = torch.randn(m, k, dtype=torch.float16)
    b = torch.randn(k, n, dtype=torch.float16)
    return [a, b]


def get_init_inputs():
    return []
