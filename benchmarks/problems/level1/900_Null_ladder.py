"""The null-call ladder's problem (benchmarks only): double a small vector. Its solutions
(`bench/bench_small_kernels_gpu.py` writes them) do that in one Triton program that also spins
on %globaltimer for a known time, so the scored time can be held to the kernel's own duration."""
import torch
import torch.nn as nn

OP_TYPE = "elementwise"
SUPPORTED_PRECISIONS = ['fp32']
HARDWARE_REQUIRED = ['H100']


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 2.0


n = 1024
REDUCED_SIZES = {"n": 256}


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
