"""CHEAT (returning an input view): GELU written into the input buffer, which is returned."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_inplace(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(x_ptr + offs, 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476)), mask=offs < n)


class Model(nn.Module):
    def forward(self, x):
        gelu_inplace[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), BLOCK=1024)
        return x.view(x.shape)
