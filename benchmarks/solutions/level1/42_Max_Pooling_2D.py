"""Honest 2-D max pooling (any kernel size, stride, padding, dilation; floor mode) in Triton: one program per block of flattened outputs takes the max of its window's in-bounds inputs in fp32, NaN-propagating like PyTorch."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def maxpool2d_kernel(
    x_ptr, y_ptr, total, H, W, OH, OW, stride, padding, dilation, KS: tl.constexpr, BLOCK: tl.constexpr
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    ow = offs % OW
    t = offs // OW
    oh = t % OH
    plane = t // OH
    base = plane.to(tl.int64) * H * W
    h0 = oh * stride - padding
    w0 = ow * stride - padding
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    for i in tl.static_range(KS):
        h = h0 + i * dilation
        hok = (h >= 0) & (h < H)
        for j in tl.static_range(KS):
            w = w0 + j * dilation
            ok = mask & hok & (w >= 0) & (w < W)
            v = tl.load(x_ptr + base + h * W + w, mask=ok, other=-float("inf")).to(tl.float32)
            m = tl.where((v > m) | (v != v), v, m)
    tl.store(y_ptr + offs, m, mask=mask)


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation

    def forward(self, x):
        x = x.contiguous()
        N, C, H, W = x.shape
        k, s, p, d = self.kernel_size, self.stride, self.padding, self.dilation
        OH = (H + 2 * p - d * (k - 1) - 1) // s + 1
        OW = (W + 2 * p - d * (k - 1) - 1) // s + 1
        y = torch.empty((N, C, OH, OW), device=x.device, dtype=x.dtype)
        total = y.numel()
        BLOCK = 1024
        maxpool2d_kernel[(triton.cdiv(total, BLOCK),)](
            x, y, total, H, W, OH, OW, s, p, d, KS=k, BLOCK=BLOCK, num_warps=4
        )
        return y
