"""fp16 matrix multiply with a fused epilogue: out = SiLU(A @ B + bias). The target is
fusing the bias add and activation into the GEMM's store."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, n=4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(n, dtype=torch.float16) * 0.02)

    def forward(self, a, b):
        c = a.to(torch.float16) @ b.to(torch.float16)
        return F.silu(c + self.bias)


OP_TYPE = "gemm_epilogue"
SUPPORTED_PRECISIONS = ["fp16", "bf16"]
HARDWARE_REQUIRED = ["H100", "B200"]
SPECIALIZED_LEVEL = 2

m = 2048
n = 4096
k = 2048

REDUCED_SIZES = {"m": 64, "n": 128, "k": 96}


def get_inputs():
    a = torch.randn(m, k, dtype=torch.float16)
    b = torch.randn(k, n, dtype=torch.float16)
    return [a, b]


def get_init_inputs():
    # The published file returns [] and relies on the default n=4096; passing n keeps the bias
    # length equal to the GEMM's N when the sizes are overridden (same model at default sizes).
    return [n]
