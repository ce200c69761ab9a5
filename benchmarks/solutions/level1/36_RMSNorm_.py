"""Honest RMSNorm over the channel axis of an NCHW tensor: one program per (sample, block of
spatial positions) loads every channel of its positions, reduces their squares in fp32 and writes
the normalized values. One read and one write of the tensor: memory-bound, with a large output."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, y_ptr, C, HW, eps, BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr):
    b = tl.program_id(0)
    p = tl.program_id(1) * BLOCK_P + tl.arange(0, BLOCK_P)
    c = tl.arange(0, BLOCK_C)
    mask = (c[:, None] < C) & (p[None, :] < HW)
    offs = b * C * HW + c[:, None] * HW + p[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    rms = tl.sqrt(tl.sum(x * x, 0) / C + eps)
    tl.store(y_ptr + offs, x / rms[None, :], mask=mask)


class Model(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        B, C = x.shape[0], x.shape[1]
        HW = x.numel() // (B * C)
        BLOCK_P = 64
        grid = (B, triton.cdiv(HW, BLOCK_P))
        rmsnorm_kernel[grid](x, y, C, HW, self.eps, BLOCK_C=triton.next_power_of_2(C), BLOCK_P=BLOCK_P)
        return y
