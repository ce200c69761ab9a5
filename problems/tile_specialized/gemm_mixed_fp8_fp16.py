"""Mixed-precision GEMM: "FP8-like" activations (int8 integers in [-127, 126] with one fp32
scale) dequantised to fp16, times fp16 weights, with an fp16 result."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a_q, b_fp16, scale_a):
        a = (a_q.float() * scale_a.float()).to(torch.float16)
        return a @ b_fp16.to(torch.float16)


OP_TYPE = "gemm"
SUPPORTED_PRECISIONS = ["fp8", "fp16"]
HARDWARE_REQUIRED = ["H100", "B200"]
SPECIALIZED_LEVEL = 1

m = 2048
n = 2048
k = 2048

REDUCED_SIZES = {"m": 64, "n": 96, "k": 128}


def get_inputs():
    a_q = torch.randint(-127, 127, (m, k), dtype=torch.int8)
    b_fp16 = torch.randn(k, n, dtype=torch.float16)
    scale_a = torch.tensor(0.01, dtype=torch.float32)
    return [a_q, b_fp16, scale_a]


def get_init_inputs():
    return []
