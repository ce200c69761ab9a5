"""2-D convolution, mish activation (x * tanh(softplus(x))), then BatchNorm2d."""
import torch
import torch.nn as nn
import torch.nn.functional as F

OP_TYPE = "fused"
SUPPORTED_PRECISIONS = ['fp16', 'bf16', 'fp32']
HARDWARE_REQUIRED = ['RTX3090', 'H100', 'B200']


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, eps=1e-5, momentum=0.1):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        # A stock BatchNorm2d, so train mode (batch stats) and eval mode (running stats) both
        # behave as published; the harness evaluates in eval mode.
        self.bn = nn.BatchNorm2d(out_channels, eps=eps, momentum=momentum)

    def forward(self, x):
        x = self.conv(x)
        x = torch.multiply(torch.tanh(F.softplus(x)), x)
        return self.bn(x)


batch_size = 16
in_channels = 3
out_channels = 16
height, width = 256, 256
kernel_size = 3
REDUCED_SIZES = {"batch_size": 2, "out_channels": 8, "height": 24, "width": 32}


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
