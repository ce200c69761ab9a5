"""Linear layer, then scale and add back the unscaled result: (1 + s) * linear(x)."""
import torch
import torch.nn as nn

OP_TYPE = "fused"
SUPPORTED_PRECISIONS = ['fp16', 'bf16', 'fp32']
HARDWARE_REQUIRED = ['RTX3090', 'H100', 'B200']


class Model(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.matmul(x)
        residual = x.clone().detach()
        x = x * self.scaling_factor
        return x + residual


batch_size = 128
in_features = 4096
out_features = 4096
scaling_factor = 0.5
REDUCED_SIZES = {"batch_size": 8, "in_features": 256, "out_features": 192}


def get_inputs():
    x = torch.randn(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features, scaling_factor]
