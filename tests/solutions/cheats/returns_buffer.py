"""CHEAT (returning a parameter/buffer): the softmax is written into a buffer the module owns
and that buffer itself is returned, so the next call overwrites earlier results."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_softmax(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * n_cols + offs, e / tl.sum(e, 0), mask=mask)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("out", torch.empty(0), persistent=False)

    def forward(self, x):
        rows, cols = x.shape
        if self.out.shape != x.shape:
            self.out = torch.empty_like(x)
        row_softmax[(rows,)](x, self.out, cols, BLOCK=triton.next_power_of_2(cols))
        return self.out
