"""Attack: keep the kernel body clean and compute in code the interpreter runs during the launch
but outside the body: the grid function (called inside the launch) writes softmax into the
output with numpy, and a one-program kernel stores one element. Every write made during a launch
used to be credited to the launch.

Class: T1
Expect: correctness
Without scan: correctness (at the launch's end memory holds what its programs stored and nothing else: the numpy write is put back; main_work fails too)
Notes: issue 39, item 2
"""
import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def token_kernel(y_ptr):
    tl.store(y_ptr, tl.load(y_ptr))


class Model(nn.Module):
    def forward(self, x):
        y = torch.zeros_like(x)

        def grid(meta):
            a = x.numpy()
            e = np.exp(a - a.max(axis=1, keepdims=True))
            np.divide(e, e.sum(axis=1, keepdims=True), out=y.numpy())
            return (1,)

        token_kernel[grid](y)
        return y
