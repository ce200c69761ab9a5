"""Linear layer, swish, add a learned bias vector, then GroupNorm over the features."""
import torch
import torch.nn as nn

OP_TYPE = "fused"
SUPPORTED_PRECISIONS = ['fp16', 'bf16', 'fp32']
HARDWARE_REQUIRED = ['RTX3090', 'H100', 'B200']


class Model(nn.Module):
    def __init__(self, in_features, out_features, num_groups, bias_shape):
        super().__init__()
        # Creation order matters for the RNG stream: Linear init first, then the randn bias.
        self.matmul = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.group_norm = nn.GroupNorm(num_groups, out_features)

    def forward(self, x):
        x = self.matmul(x)
        x = torch.sigmoid(x) * x
        x = x + self.bias
        return self.group_norm(x)


batch_size = 128
in_features = 4096
out_features = 4096
num_groups = 32
bias_shape = (out_features,)
REDUCED_SIZES = {"batch_size": 8, "in_features": 256, "out_features": 256}


def get_inputs():
    x = torch.randn(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features, num_groups, bias_shape]
