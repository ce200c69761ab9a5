"""Attack: compute with torch.softmax and launch a one-element Triton copy kernel on the result so an own kernel really runs (a token kernel).

Class: T1
Expect: library_ops (the reference's own compute op is dispatched, at any share)
Without scan: same
Notes: custom_kernel passes (a real program with a non-empty grid ran); the output is correct
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride
    y_row = y_ptr + row * stride
    offs = tl.arange(0, BLOCK)
    # A finite start: lanes that never see a valid column must not compute exp(-inf - -inf).
    m = tl.full([BLOCK], -1.0e30, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + offs, mask=start + offs < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    row_max = tl.max(m, 0)
    row_sum = tl.sum(s * tl.exp(m - row_max), 0)
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        x = tl.load(x_row + start + offs, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(y_row + start + offs, tl.exp(x - row_max) / row_sum, mask=mask)


def triton_softmax(x, out=None):
    """The honest reference kernel (examples/solutions/level1/23_Softmax.py), unchanged."""
    x = x.contiguous()
    y = torch.empty_like(x) if out is None else out
    rows, cols = x.shape
    block = min(triton.next_power_of_2(cols), 4096)
    softmax_kernel[(rows,)](x, y, cols, x.stride(0), BLOCK=block)
    return y


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.softmax(x, dim=1)
        out = y.clone()
        copy_kernel[(1,)](y, out, 1, BLOCK=16)  # copies one element
        return out
