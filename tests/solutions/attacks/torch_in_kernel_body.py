"""Attack: the kernel body calls torch.softmax itself, under torch._C._DisableTorchDispatch(),
which also hides the op from the evaluator's op recorder (`library_ops` never sees it); the
tensors arrive as constexpr arguments (red team of issue 39).

Class: T1
Expect: source_scan
Without scan: run (the launch is refused: the body reaches torch)
Notes: issue 39, item 2; the scan names torch._C (torch_private)
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def body_kernel(y_ptr, X: tl.constexpr, Y: tl.constexpr):
    with torch._C._DisableTorchDispatch():
        Y.copy_(torch.softmax(X, dim=1))
    tl.store(y_ptr, tl.load(y_ptr))


class Model(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        body_kernel[(1,)](y, X=x, Y=y)
        return y
