"""Linear layer, division by a constant, then exact (erf) GELU."""
import torch
import torch.nn as nn
import torch.nn.functional as F

OP_TYPE = "fused"
SUPPORTED_PRECISIONS = ['fp16', 'bf16', 'fp32']
HARDWARE_REQUIRED = ['RTX3090', 'H100', 'B200']


class Model(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x):
        x = self.linear(x)
        x = x / self.divisor
        return F.gelu(x)


batch_size = 128
input_size = 4096
output_size = 4096
divisor = 10.0
REDUCED_SIZES = {"batch_size": 8, "input_size": 256, "output_size": 192}


def get_inputs():
    x = torch.randn(batch_size, input_size)
    return [x]


def get_init_inputs():
    return [input_size, output_size, divisor]
