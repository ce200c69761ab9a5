"""Honest control: softmax in two kernels, a statistics pass (each row's max and sum of
exponentials into small buffers) and a normalizing pass that reads the input again; both
launches read the same input, the second also the first's buffers."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_stats_kernel(x_ptr, max_ptr, sum_ptr, n_cols, stride, BLOCK: tl.constexpr):
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
    tl.store(max_ptr + row, row_max)
    tl.store(sum_ptr + row, tl.sum(s * tl.exp(m - row_max), 0))


@triton.jit
def normalize_kernel(x_ptr, y_ptr, max_ptr, sum_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    block = tl.program_id(1)
    offs = block * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=0.0)
    y = tl.exp(x - tl.load(max_ptr + row)) / tl.load(sum_ptr + row)
    tl.store(y_ptr + row * stride + offs, y, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        row_max = torch.empty(rows, dtype=torch.float32)
        row_sum = torch.empty(rows, dtype=torch.float32)
        block = min(triton.next_power_of_2(cols), 4096)
        row_stats_kernel[(rows,)](x, row_max, row_sum, cols, x.stride(0), BLOCK=block)
        normalize_kernel[(rows, triton.cdiv(cols, block))](x, y, row_max, row_sum, cols, x.stride(0), BLOCK=block)
        return y
