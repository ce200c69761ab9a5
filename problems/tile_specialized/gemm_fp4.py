"""Scaled low-bit GEMM, "FP4" flavour: A and B hold integers in [-8, 7] (int4 range) stored in
int8, each with one fp32 scale. out = (A*sa) @ (B*sb), computed in fp32 and returned as fp16."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, m=2048, n=2048, k=2048):
        super().__init__()
        # Kept for interface parity; the forward reads the shapes from its inputs.
        self.m = m
        self.n = n
        self.k = k

    def forward(self, a_q, b_q, scale_a, scale_b):
        a = a_q.float() * scale_a.float()
        b = b_q.float() * scale_b.float()
        return (a @ b).to(torch.float16)


OP_TYPE = "gemm"
SUPPORTED_PRECISIONS = ["fp4"]
HARDWARE_REQUIRED = ["B200"]
SPECIALIZED_LEVEL = 1

m = 2048
n = 2048
k = 2048

REDUCED_SIZES = {"m": 64, "n": 96, "k": 128}


def get_inputs():
    a_q = torch.randint(-8, 8, (m, k), dtype=torch.int8)
    b_q = torch.randint(-8, 8, (k, n), dtype=torch.int8)
    scale_a = torch.tensor(0.08, dtype=torch.float32)
    scale_b = torch.tensor(0.08, dtype=torch.float32)
    return [a_q, b_q, scale_a, scale_b]


def get_init_inputs():
    return []
