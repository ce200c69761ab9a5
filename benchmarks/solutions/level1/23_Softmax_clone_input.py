"""Honest online softmax in Triton on a clone of its input, computed in place: the clone is a copy
node in the captured graph, which needs no SM. Under the occupancy gate (KBV3_GATE=hold) it must
run on the call's new inputs, not the previous call's: a control for the order of the timer's
input write and the call's stream wait (docs/timing.md, "The occupancy gate")."""

import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_online_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x_row = x_ptr + row.to(tl.int64) * stride
    y_row = y_ptr + row.to(tl.int64) * stride
    m = tl.full([BLOCK], -1e30, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + offs, mask=start + offs < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    row_max = tl.max(m, 0)
    total = tl.sum(s * tl.exp(m - row_max), 0)
    inv = 1.0 / total
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        x = tl.load(x_row + start + offs, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(y_row + start + offs, tl.exp(x - row_max) * inv, mask=mask)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = x.contiguous().clone()
        rows, cols = y.shape
        BLOCK = min(triton.next_power_of_2(cols), 4096)
        softmax_online_kernel[(rows,)](y, y, cols, y.stride(0), BLOCK=BLOCK, num_warps=8)
        return y
