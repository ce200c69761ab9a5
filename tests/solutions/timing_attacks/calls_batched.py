"""Attack: batching across calls. On each timed call, compute the softmax of every input set of
the timing region in one batched pass and keep the results; when a later call names a set whose
result is kept, answer from the cache without computing. Under the old k-call windows all of a
window's inputs were in memory at its first call; now a call's inputs are written only after the
previous call's window closed, so what is kept is always stale.

Problem: level1/23_Softmax
Class: T1
Expect: timed_outputs (the kept results belong to earlier inputs)
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride
    y_row = y_ptr + row * stride
    offs = tl.arange(0, BLOCK)
    # A finite start: lanes that never see a valid column must not compute exp(-inf - -inf).
    m = tl.full([BLOCK], -1.0e30, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + offs, mask=start + offs < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    row_max = tl.max(m, 0)
    row_sum = tl.sum(s * tl.exp(m - row_max), 0)
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        x = tl.load(x_row + start + offs, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(y_row + start + offs, tl.exp(x - row_max) / row_sum, mask=mask)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        block = min(triton.next_power_of_2(cols), 4096)
        softmax_kernel[(rows,)](x, y, cols, x.stride(0), BLOCK=block)
        return y


import sys as _sys

_worker = _sys.modules.get("kernelbench_v3.evaluate.solution." + "worker")

if _worker is not None:
    _kept = {}
    _Real = _worker.TimedCalls.run

    def _run(self, s):
        if s in _kept:
            out = self.slots[s] if not self.graphs else self.outputs[s]
            out.copy_(_kept.pop(s))
            return out
        xs = torch.cat([inputs[0] for inputs in self.sets])
        ys = Model().forward(xs).split(self.sets[0][0].shape[0])
        for i, y in enumerate(ys):
            if i != s:
                _kept[i] = y.clone()
        return _Real(self, s)

    _worker.TimedCalls.run = _run
