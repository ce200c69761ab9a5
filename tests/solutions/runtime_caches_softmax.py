"""HONEST: a Triton softmax whose import makes Python and torch write their own lazy caches and
patches (copyreg's `__slotnames__` by deep-copying and pickling tensors and modules, Dynamo's
nn.Module generation tagging by calling a torch.compile'd helper). None of it is monkeypatching."""
import copy
import pickle

import torch
import torch.nn as nn
import triton
import triton.language as tl

_TEMPLATE = copy.deepcopy(torch.ones(4))
_BLOB = pickle.dumps(nn.Linear(2, 2))
_check = torch.compile(lambda t: t + 1, backend="eager")
assert torch.equal(_check(_TEMPLATE), torch.full((4,), 2.0))


@triton.jit
def softmax_rows(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * stride + offs, e / tl.sum(e, 0), mask=mask)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        softmax_rows[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
