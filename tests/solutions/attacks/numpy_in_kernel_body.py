"""Attack: under the Triton interpreter a kernel body is plain Python, so let the body itself
compute softmax with numpy over arrays passed in as constexpr arguments and write the output,
with one token store as the kernel's own work; provenance credited every write made during the
launch to the launch (red team of issue 39).

Class: T1
Expect: run
Without scan: run (the launch is refused: the body reaches numpy, and its arguments are arrays, not triton values)
Notes: issue 39, item 2
"""
import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def body_kernel(x_ptr, y_ptr, X: tl.constexpr, Y: tl.constexpr):
    e = np.exp(X - X.max(axis=1, keepdims=True))
    np.divide(e, e.sum(axis=1, keepdims=True), out=Y)
    tl.store(y_ptr, tl.load(y_ptr))


class Model(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        body_kernel[(1,)](x, y, X=x.numpy(), Y=y.numpy())
        return y
