"""Plain bf16 matrix multiply, C = A @ B: a baseline for tensor-core-tuned GEMM kernels."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a.to(torch.bfloat16) @ b.to(torch.bfloat16)


OP_TYPE = "gemm"
SUPPORTED_PRECISIONS = ["bf16"]
HARDWARE_REQUIRED = ["RTX3090", "A100", "H100", "B200"]
SPECIALIZED_LEVEL = 1

m = 2048
n = 2048
k = 2048

REDUCED_SIZES = {"m": 64, "n": 96, "k": 128}


def get_inputs():
    a = torch.randn(m, k, dtype=torch.bfloat16)
    b = torch.randn(k, n, dtype=torch.bfloat16)
    return [a, b]


def get_init_inputs():
    return []
