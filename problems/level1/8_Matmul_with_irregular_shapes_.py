"""C = A @ B where M, K and N are all odd, so no dimension is aligned."""
import torch
import torch.nn as nn

OP_TYPE = "gemm"
SUPPORTED_PRECISIONS = ['fp4', 'fp8', 'fp16', 'bf16', 'fp32']
HARDWARE_REQUIRED = ['RTX3090', 'H100', 'B200']


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


M = 8205
K = 2949
N = 5921
# The reduced sizes stay odd so that the unaligned-tail structure is kept.
REDUCED_SIZES = {"M": 67, "K": 45, "N": 59}


def get_inputs():
    A = torch.randn(M, K)
    B = torch.randn(K, N)
    return [A, B]


def get_init_inputs():
    return []
