"""A solution that faults on the GPU (GPU only): its kernel stores through a wild pointer, an
illegal address. Under MPS the server's clients can share a fault, so this must still get its
verdict (failed), and the next evaluation in the same process must be unaffected.

Problem: level1/26_GELU_
Class: fault
Expect: failed (the solution process's CUDA error); the next evaluation unaffected
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def wild_store_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs + (1 << 40), x, mask=offs < n)  # a terabyte past the output


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        wild_store_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
