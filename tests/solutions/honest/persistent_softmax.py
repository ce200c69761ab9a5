"""Honest control: a persistent-style grid, a fixed number of programs that each loop over the
rows with a stride of the grid (`tl.num_programs`), as a GPU kernel sized to the SM count is."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

PROGRAMS = 4


@triton.jit
def persistent_softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, stride, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x = tl.load(x_ptr + row * stride + offs, mask=mask, other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row * stride + offs, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        grid = (min(PROGRAMS, rows),)
        persistent_softmax_kernel[grid](x, y, rows, cols, x.stride(0), BLOCK=triton.next_power_of_2(cols))
        return y
