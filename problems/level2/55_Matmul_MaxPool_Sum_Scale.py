"""Linear layer, max over adjacent feature pairs, row sum, then scaling: one value per row."""
import torch
import torch.nn as nn

OP_TYPE = "fused"
SUPPORTED_PRECISIONS = ['fp16', 'bf16', 'fp32']
HARDWARE_REQUIRED = ['RTX3090', 'H100', 'B200']


class Model(nn.Module):
    def __init__(self, in_features, out_features, kernel_size, scale_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.max_pool = nn.MaxPool1d(kernel_size)
        self.scale_factor = scale_factor

    def forward(self, x):
        x = self.matmul(x)
        x = self.max_pool(x.unsqueeze(1)).squeeze(1)
        x = torch.sum(x, dim=1)
        return x * self.scale_factor


batch_size = 128
in_features = 4096
out_features = 4096
kernel_size = 2
scale_factor = 0.5
REDUCED_SIZES = {"batch_size": 8, "in_features": 256, "out_features": 192}


def get_inputs():
    x = torch.randn(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features, kernel_size, scale_factor]
