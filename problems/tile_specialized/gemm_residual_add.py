"""fp16 GEMM with a residual added in the epilogue: out = A @ B + R."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b, residual):
        return (a.to(torch.float16) @ b.to(torch.float16)) + residual.to(torch.float16)


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
    residual = torch.randn(m, n, dtype=torch.float16)
    return [a, b, residual]


def get_init_inputs():
    return []
