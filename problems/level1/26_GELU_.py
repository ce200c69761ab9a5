"""Elementwise GELU in its exact (erf) form."""
import torch
import torch.nn as nn
import torch.nn.functional as F

OP_TYPE = "elementwise"
SUPPORTED_PRECISIONS = ['fp16', 'bf16', 'fp32']
HARDWARE_REQUIRED = ['RTX3090', 'H100', 'B200']


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.gelu(x)


batch_size = 256
dim = 16384
REDUCED_SIZES = {"batch_size": 16, "dim": 1024}


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
