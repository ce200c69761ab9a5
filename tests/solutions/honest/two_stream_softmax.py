"""Honest control: the rows split in two halves, each softmaxed by its own launch into its half of
one output (on a GPU each half on a stream of its own; the interpreter runs them in turn). The
second launch must leave the first one's stores in place."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rows_softmax_kernel(x_ptr, y_ptr, first_row, n_cols, stride, BLOCK: tl.constexpr):
    row = first_row + tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + offs, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        half = rows // 2
        block = triton.next_power_of_2(cols)
        if x.is_cuda:
            streams = [torch.cuda.Stream(), torch.cuda.Stream()]
            for stream in streams:
                stream.wait_stream(torch.cuda.current_stream())
        for i, (first, count) in enumerate(((0, half), (half, rows - half))):
            if count == 0:
                continue
            if x.is_cuda:
                with torch.cuda.stream(streams[i]):
                    rows_softmax_kernel[(count,)](x, y, first, cols, x.stride(0), BLOCK=block)
            else:
                rows_softmax_kernel[(count,)](x, y, first, cols, x.stride(0), BLOCK=block)
        if x.is_cuda:
            for stream in streams:
                torch.cuda.current_stream().wait_stream(stream)
        return y
