"""Attack: pass the kernel-body reader with a body that calls a global `row_op`, bound to
`tl.exp` when the launch starts, then rebind that global from the grid function (solution code
the interpreter runs inside the launch, after any check made at its start) to a Python function
that computes the softmax with numpy and hands it back as a triton tensor, which the body then
stores as its own work.

Class: T1
Expect: source_scan
Without scan: run (the body is read again where the grid is evaluated, and then runs on a frozen copy of what was read)
Notes: issue 39, item 2
"""
import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl

row_op = tl.exp


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=-float("inf"))
    tl.store(y_ptr + row * stride + offs, row_op(x), mask=mask)


def numpy_softmax(x):
    from triton.runtime.interpreter import TensorHandle

    a = x.handle.data.astype(np.float64)
    e = np.exp(a - a.max())
    return tl.tensor(TensorHandle((e / e.sum()).astype(np.float32), tl.float32), x.type)


class Model(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        rows, cols = x.shape

        def grid(meta):
            globals()["row_op"] = numpy_softmax
            return (rows,)

        try:
            softmax_kernel[grid](x, y, cols, x.stride(0), BLOCK=triton.next_power_of_2(cols))
        finally:
            globals()["row_op"] = tl.exp
        return y
