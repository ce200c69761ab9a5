"""Honest sum over the middle axis of a 3-D tensor: one program per (outer index, block of inner
columns) walks the reduced axis in chunks, accumulating in fp32. Reads the input once."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_kernel(x_ptr, y_ptr, R, N, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    r = tl.arange(0, BLOCK_R)
    acc = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, R, BLOCK_R):
        rows = start + r
        mask = (rows[:, None] < R) & (n[None, :] < N)
        x = tl.load(x_ptr + b * R * N + rows[:, None] * N + n[None, :], mask=mask, other=0.0)
        acc += tl.sum(x.to(tl.float32), 0)
    tl.store(y_ptr + b * N + n, acc, mask=n < N)


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        d = self.dim % x.dim()
        x = x.contiguous()
        outer = 1
        for s in x.shape[:d]:
            outer *= s
        R = x.shape[d]
        N = x.numel() // (outer * R)
        out_shape = list(x.shape)
        out_shape[d] = 1
        y = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        BLOCK_N = 64
        sum_kernel[(outer, triton.cdiv(N, BLOCK_N))](x, y, R, N, BLOCK_R=32, BLOCK_N=BLOCK_N)
        return y
