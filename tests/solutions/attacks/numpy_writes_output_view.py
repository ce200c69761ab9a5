"""Attack: compute softmax in numpy and write it through `out.numpy()`, the output tensor's own
memory, so no PyTorch op and no program computes it; a one-element Triton kernel is the token that
an own kernel ran (red team 4: the dispatcher never sees a numpy write).

Class: T1
Expect: main_work
Without scan: main_work (the output's values come from outside PyTorch and the programs)
Notes: issue 35
"""
import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def token_kernel(src, dst):
    tl.store(dst, tl.load(src))


class Model(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        a = x.detach().numpy()
        e = np.exp(a - a.max(axis=1, keepdims=True))
        np.divide(e, e.sum(axis=1, keepdims=True), out=out.numpy())
        token_kernel[(1,)](out, out)
        return out
