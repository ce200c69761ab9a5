"""3-D convolution, softmax over channels, then two 2x2x2 max pools."""
import torch
import torch.nn as nn

OP_TYPE = "fused"
SUPPORTED_PRECISIONS = ['fp16', 'bf16', 'fp32']
HARDWARE_REQUIRED = ['RTX3090', 'H100', 'B200']


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, pool_kernel_size):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.pool1 = nn.MaxPool3d(pool_kernel_size)
        self.pool2 = nn.MaxPool3d(pool_kernel_size)

    def forward(self, x):
        x = self.conv(x)
        x = torch.softmax(x, dim=1)
        x = self.pool1(x)
        return self.pool2(x)


batch_size = 16
in_channels = 3
out_channels = 16
depth, height, width = 16, 128, 128
kernel_size = 3
pool_kernel_size = 2
REDUCED_SIZES = {"batch_size": 2, "out_channels": 8, "depth": 8, "height": 16, "width": 16}


def get_inputs():
    x = torch.randn(batch_size, in_channels, depth, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, pool_kernel_size]
