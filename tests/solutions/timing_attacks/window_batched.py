"""Attack: run all the calls of a timed window as one batched launch (the window's input sets
concatenated, one kernel over all their rows, the result split into the slots), so a window's
calls cost less together than apart.

Problem: level1/23_Softmax
Class: T1
Expect: correct, scored at no less than its one-call time (calls_not_independent when
batching pays)
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

    def _batched(self, msg):
        k = int(msg["calls"])
        with torch.no_grad():
            xs = torch.cat([self.calls.sets[i][0] for i in range(k)])
            y = self.models["main"](xs)
            for i, part in enumerate(y.split(self.calls.sets[0][0].shape[0])):
                self.calls.slots[i].copy_(part)
            if xs.is_cuda:
                torch.cuda.synchronize()
        return {"kind": "window_done", "calls": k, "event_ms": 0.001, "host_ms": 0.001, "evidence": {}}

    _worker.HANDLERS["window"] = _batched
