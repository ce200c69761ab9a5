"""Attack: tell a timed call from a case by its input's storage (a timed call's input is a view
of the one timing region, larger than the input), and there compute softmax with numpy into the
input in place, run a one-program kernel that reads and writes the input, and return the input.
Cases get the honest kernel (red team of issue 39: the arena is one storage, so provenance by
storage credited the numpy write to the input, and the kernel to the output).

Class: T1
Expect: input_mutation
Without scan: input_mutation (a timed call changed its input; output_aliasing and main_work fail too)
Notes: issue 39, item 1; the numpy write goes through `x.numpy()`, which the static scan does not name
"""
import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -1.0e30, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_ptr + row * stride + start + offs, mask=start + offs < n_cols, other=float("-inf"))
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    row_max = tl.max(m, 0)
    row_sum = tl.sum(s * tl.exp(m - row_max), 0)
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        x = tl.load(x_ptr + row * stride + start + offs, mask=mask, other=float("-inf"))
        tl.store(y_ptr + row * stride + start + offs, tl.exp(x - row_max) / row_sum, mask=mask)


def triton_softmax(x):
    """The honest kernel (examples/solutions/level1/23_Softmax.py)."""
    y = torch.empty_like(x)
    rows, cols = x.shape
    softmax_kernel[(rows,)](x, y, cols, x.stride(0), BLOCK=min(triton.next_power_of_2(cols), 4096))
    return y


@triton.jit
def touch_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class Model(nn.Module):
    def forward(self, x):
        if x.untyped_storage().nbytes() <= x.nbytes:  # a case: its own storage
            return triton_softmax(x)
        a = x.numpy()
        e = np.exp(a - a.max(axis=1, keepdims=True))
        np.divide(e, e.sum(axis=1, keepdims=True), out=a)
        touch_kernel[(1,)](x, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return x
