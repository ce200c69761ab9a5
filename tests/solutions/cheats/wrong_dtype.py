"""CHEAT (wrong dtype): correct softmax values, returned as float64."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_softmax(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * n_cols + offs, e / tl.sum(e, 0), mask=mask)


class Model(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        y = torch.empty_like(x)
        row_softmax[(rows,)](x, y, cols, BLOCK=triton.next_power_of_2(cols))
        return y.double()
