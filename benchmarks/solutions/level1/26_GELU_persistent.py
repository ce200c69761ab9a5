"""Honest exact (erf) GELU with a persistent-style grid: one program per streaming
multiprocessor, each looping over blocks with a grid stride, instead of one program per block."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096


@triton.jit
def gelu_persistent_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    blocks = tl.cdiv(n, BLOCK)
    for b in range(pid, blocks, programs):
        offs = b * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
        y = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
        tl.store(y_ptr + offs, y, mask=mask)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.programs = None

    def forward(self, x):
        if self.programs is None:
            self.programs = torch.cuda.get_device_properties(x.device).multi_processor_count
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        grid = (min(self.programs, triton.cdiv(n, BLOCK)),)
        gelu_persistent_kernel[grid](x, y, n, BLOCK=BLOCK, num_warps=8)
        return y
