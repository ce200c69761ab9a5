"""Linear layer, exact (erf) GELU, then softmax over the features."""
import torch
import torch.nn as nn
import torch.nn.functional as F

OP_TYPE = "fused"
SUPPORTED_PRECISIONS = ['fp16', 'bf16', 'fp32']
HARDWARE_REQUIRED = ['RTX3090', 'H100', 'B200']


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.linear(x)
        x = F.gelu(x)
        return F.softmax(x, dim=1)


batch_size = 128
in_features = 4096
out_features = 4096
REDUCED_SIZES = {"batch_size": 8, "in_features": 256, "out_features": 192}


def get_inputs():
    x = torch.randn(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features]
