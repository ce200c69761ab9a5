"""Honest softmax over rows in three passes of a Triton program per row: the row's maximum, the
sum of exponentials, then the normalized values (the row is read three times, written once)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax3_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_ptr + row * stride + start + offs, mask=start + offs < n_cols, other=-float("inf"))
        m = tl.maximum(m, x.to(tl.float32))
    row_max = tl.max(m, 0)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_ptr + row * stride + start + offs, mask=start + offs < n_cols, other=-float("inf"))
        s += tl.exp(x.to(tl.float32) - row_max)
    total = tl.sum(s, 0)
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        x = tl.load(x_ptr + row * stride + start + offs, mask=mask, other=-float("inf"))
        tl.store(y_ptr + row * stride + start + offs, tl.exp(x.to(tl.float32) - row_max) / total, mask=mask)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        softmax3_kernel[(rows,)](x, y, cols, x.stride(0), BLOCK=min(triton.next_power_of_2(cols), 4096), num_warps=8)
        return y
