import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_relu_kernel(x_ptr, bias_ptr, out_ptr, n_elements, dim, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    b = tl.load(bias_ptr + offsets % dim, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x + b, 0.0), mask=mask)


class Model(nn.Module):
    # Same constructor and parameter name as the reference, so its weights load strictly.
    def __init__(self, dim):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 1024
        bias_relu_kernel[(triton.cdiv(n, BLOCK),)](x, self.bias, out, n, x.shape[-1], BLOCK=BLOCK)
        return out
