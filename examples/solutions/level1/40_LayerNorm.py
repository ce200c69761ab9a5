"""LayerNorm over the last three dims: one Triton program per sample computes mean and variance
(two passes over the row in blocks, fp32), then normalizes and applies the elementwise affine."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * n
    y_row = y_ptr + row * n
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n, BLOCK):
        acc += tl.load(x_row + start + offs, mask=start + offs < n, other=0.0).to(tl.float32)
    mean = tl.sum(acc, 0) / n
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n, BLOCK):
        x = tl.load(x_row + start + offs, mask=start + offs < n, other=0.0).to(tl.float32)
        d = tl.where(start + offs < n, x - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, 0) / n + eps)
    for start in range(0, n, BLOCK):
        mask = start + offs < n
        x = tl.load(x_row + start + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0)
        b = tl.load(b_ptr + start + offs, mask=mask, other=0.0)
        tl.store(y_row + start + offs, (x - mean) * rstd * w + b, mask=mask)


class Model(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        x = x.contiguous()
        n = self.ln.weight.numel()
        y = torch.empty_like(x)
        rows = x.numel() // n
        layernorm_kernel[(rows,)](x, self.ln.weight.contiguous(), self.ln.bias.contiguous(), y, n,
                                  self.ln.eps, BLOCK=min(triton.next_power_of_2(n), 4096))
        return y
