"""Honest softmax over two streams, joined properly: the first half of the rows on the caller's
stream, the second half on a side stream that waits for the inputs, then the caller's stream
waits for the side stream and the output is marked as used there (`record_stream`). Ordinary
multi-stream code: the evaluator must time it whole and accept it."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_rows_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -1.0e30, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_ptr + row * stride + start + offs, mask=start + offs < n_cols, other=float("-inf"))
        m_new = tl.maximum(m, x.to(tl.float32))
        s = s * tl.exp(m - m_new) + tl.exp(x.to(tl.float32) - m_new)
        m = m_new
    row_max = tl.max(m, 0)
    total = tl.sum(s * tl.exp(m - row_max), 0)
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        x = tl.load(x_ptr + row * stride + start + offs, mask=mask, other=float("-inf"))
        tl.store(y_ptr + row * stride + start + offs, tl.exp(x.to(tl.float32) - row_max) / total, mask=mask)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None

    def forward(self, x):
        if self.side is None:
            self.side = torch.cuda.Stream()
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        half = rows // 2
        block = min(triton.next_power_of_2(cols), 4096)
        main = torch.cuda.current_stream()
        self.side.wait_stream(main)
        softmax_rows_kernel[(half,)](x, y, cols, x.stride(0), BLOCK=block, num_warps=8)
        with torch.cuda.stream(self.side):
            softmax_rows_kernel[(rows - half,)](x[half:], y[half:], cols, x.stride(0), BLOCK=block, num_warps=8)
        main.wait_stream(self.side)
        x.record_stream(self.side)
        y.record_stream(self.side)
        return y
