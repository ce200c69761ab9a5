"""Attack: on a linear problem, answer from stored results: the first calls are computed and kept
(input, output); every later call is written as a least-squares combination of the stored
inputs and answered with the same combination of their outputs, plus a token kernel.

Problem: level1/47_Sum_reduction_over_a_dimension
Class: T1
Expect: timed_outputs (timed inputs are new random draws, not blends of anything seen); on CPU
main_work fails first (the least-squares answer is PyTorch work)
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


def copied(y):
    out = torch.empty_like(y)
    copy_kernel[(triton.cdiv(y.numel(), 1024),)](y, out, y.numel(), BLOCK=1024)
    return out


@triton.jit
def sum_kernel(x_ptr, y_ptr, n_reduce, n_inner, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    outer = pid // n_inner
    inner = pid % n_inner
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_reduce, BLOCK):
        r = start + offs
        acc += tl.load(x_ptr + outer * n_reduce * n_inner + r * n_inner + inner, mask=r < n_reduce, other=0.0)
    tl.store(y_ptr + pid, tl.sum(acc, 0))


STORED = 12


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim
        self.inputs, self.outputs = [], []

    def honest(self, x):
        x = x.contiguous()
        b, r, i = x.shape
        y = torch.empty((b, 1, i), device=x.device, dtype=torch.float32)
        sum_kernel[(b * i,)](x, y, r, i, BLOCK=64)
        return y

    def forward(self, x):
        if len(self.inputs) < STORED:
            y = self.honest(x)
            self.inputs.append(x.detach().reshape(-1).clone())
            self.outputs.append(y.detach().reshape(-1).clone())
            return y
        basis = torch.stack(self.inputs, dim=1)
        weights = torch.linalg.lstsq(basis, x.detach().reshape(-1, 1)).solution
        y = torch.zeros_like(self.outputs[0])
        for w, out in zip(weights.reshape(-1).tolist(), self.outputs):  # axpy: no aten sum or GEMM
            y = y + w * out
        return copied(y.reshape(x.shape[0], 1, x.shape[2]).contiguous())
