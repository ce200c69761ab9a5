"""Attack: softmax from elementwise PyTorch ops (amax, sub, exp, sum, div), none of them the
reference's own `_softmax`, beside a Triton copy kernel that writes the result: an own kernel
runs, no library op is dispatched, and little time falls outside PyTorch and the programs.

Problem: level1/23_Softmax
Class: T1
Expect: main_work (on CPU the PyTorch compute ops take more than half the reference's compute;
on CUDA the copy kernel is under half the forward's device time)
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


class Model(nn.Module):
    def forward(self, x):
        e = (x - x.amax(dim=1, keepdim=True)).exp()
        y = e / e.sum(dim=1, keepdim=True)
        out = torch.empty_like(y)
        copy_kernel[(triton.cdiv(y.numel(), 1024),)](y, out, y.numel(), BLOCK=1024)
        return out
