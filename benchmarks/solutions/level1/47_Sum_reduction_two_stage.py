"""Honest two-stage sum over one axis in Triton: stage one splits the reduced axis into slices and writes fp32 partial sums per (outer index, slice, column), stage two adds the slices' partials into the keepdim output."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_partial_kernel(x_ptr, part_ptr, R, N, SPLIT, ROWS_PER_SPLIT, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    s = tl.program_id(1)
    n = tl.program_id(2) * BLOCK_N + tl.arange(0, BLOCK_N)
    r = tl.arange(0, BLOCK_R)
    acc = tl.zeros([BLOCK_N], tl.float32)
    r0 = s * ROWS_PER_SPLIT
    r_end = tl.minimum(r0 + ROWS_PER_SPLIT, R)
    base = x_ptr + b.to(tl.int64) * R * N
    for start in range(r0, r_end, BLOCK_R):
        rows = start + r
        mask = (rows[:, None] < r_end) & (n[None, :] < N)
        x = tl.load(base + rows[:, None] * N + n[None, :], mask=mask, other=0.0)
        acc += tl.sum(x.to(tl.float32), 0)
    tl.store(part_ptr + (b * SPLIT + s) * N + n, acc, mask=n < N)


@triton.jit
def sum_finish_kernel(part_ptr, y_ptr, N, SPLIT, BLOCK_S: tl.constexpr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    s = tl.arange(0, BLOCK_S)
    mask = (s[:, None] < SPLIT) & (n[None, :] < N)
    p = tl.load(part_ptr + (b * SPLIT + s[:, None]) * N + n[None, :], mask=mask, other=0.0)
    tl.store(y_ptr + b * N + n, tl.sum(p, 0), mask=n < N)


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        d = self.dim % x.dim()
        x = x.contiguous()
        outer = 1
        for sz in x.shape[:d]:
            outer *= sz
        R = x.shape[d]
        N = x.numel() // (outer * R) if R > 0 else 1
        out_shape = list(x.shape)
        out_shape[d] = 1
        y = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        BLOCK_R, BLOCK_N = 16, 128
        split = max(1, min(8, triton.cdiv(R, BLOCK_R)))
        rows_per_split = triton.cdiv(triton.cdiv(R, split), BLOCK_R) * BLOCK_R
        split = max(1, triton.cdiv(R, rows_per_split))
        part = torch.empty((outer, split, N), device=x.device, dtype=torch.float32)
        n_blocks = triton.cdiv(N, BLOCK_N)
        sum_partial_kernel[(outer, split, n_blocks)](
            x, part, R, N, split, rows_per_split, BLOCK_R=BLOCK_R, BLOCK_N=BLOCK_N, num_warps=4
        )
        sum_finish_kernel[(outer, n_blocks)](
            part, y, N, split, BLOCK_S=triton.next_power_of_2(split), BLOCK_N=BLOCK_N, num_warps=4
        )
        return y
