"""Honest LayerNorm over the last three dims, spread over the whole GPU: a first kernel writes
per-chunk partial sums and sums of squares (fp32), a second turns each row's partials into its
mean and reciprocal standard deviation, a third normalizes and applies the affine."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def partials_kernel(x_ptr, part_ptr, n, chunks, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    offs = chunk * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(part_ptr + (row * chunks + chunk) * 2, tl.sum(x, 0))
    tl.store(part_ptr + (row * chunks + chunk) * 2 + 1, tl.sum(x * x, 0))


@triton.jit
def stats_kernel(part_ptr, stat_ptr, n, chunks, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    s = tl.zeros([BLOCK], tl.float32)
    q = tl.zeros([BLOCK], tl.float32)
    for start in range(0, chunks, BLOCK):
        m = start + offs < chunks
        s += tl.load(part_ptr + (row * chunks + start + offs) * 2, mask=m, other=0.0)
        q += tl.load(part_ptr + (row * chunks + start + offs) * 2 + 1, mask=m, other=0.0)
    mean = tl.sum(s, 0) / n
    var = tl.maximum(tl.sum(q, 0) / n - mean * mean, 0.0)
    tl.store(stat_ptr + row * 2, mean)
    tl.store(stat_ptr + row * 2 + 1, 1.0 / tl.sqrt(var + eps))


@triton.jit
def normalize_kernel(x_ptr, w_ptr, b_ptr, stat_ptr, y_ptr, n, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.program_id(1) * CHUNK + tl.arange(0, CHUNK)
    mask = offs < n
    mean = tl.load(stat_ptr + row * 2)
    rstd = tl.load(stat_ptr + row * 2 + 1)
    x = tl.load(x_ptr + row * n + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + row * n + offs, (x - mean) * rstd * w + b, mask=mask)


class Model(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        x = x.contiguous()
        n = self.ln.weight.numel()
        rows = x.numel() // n
        CHUNK = 4096
        chunks = triton.cdiv(n, CHUNK)
        part = torch.empty((rows, chunks, 2), device=x.device, dtype=torch.float32)
        stat = torch.empty((rows, 2), device=x.device, dtype=torch.float32)
        y = torch.empty_like(x)
        partials_kernel[(rows, chunks)](x, part, n, chunks, CHUNK=CHUNK)
        stats_kernel[(rows,)](part, stat, n, chunks, self.ln.eps, BLOCK=1024)
        normalize_kernel[(rows, chunks)](
            x, self.ln.weight.contiguous(), self.ln.bias.contiguous(), stat, y, n, CHUNK=CHUNK
        )
        return y
