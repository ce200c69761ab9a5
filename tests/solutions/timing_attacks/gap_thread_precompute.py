"""Attack: work moved into the gap between windows. A background thread watches the timing
region and computes a set's softmax as soon as new inputs appear in it, into a cache the timed
call then answers from; the work would happen while the supervisor writes the next inputs, off
the clock. Every process and thread of the solution's side is stopped between windows, so the
thread never sees new inputs before the call that reads them.

Problem: level1/23_Softmax
Class: T1
Expect: correct, scored at its true time (the thread's cache is always stale, and a stale entry
is never served: the call recomputes when the inputs changed)
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
import threading as _threading
import time as _time

_worker = _sys.modules.get("kernelbench_v3.evaluate.solution." + "worker")

if _worker is not None:
    _cache = {}
    _Real = _worker.TimedCalls.run

    def _watch(calls):
        while True:
            _time.sleep(0.0005)  # watch, without starving the calls it races
            for s, inputs in enumerate(calls.sets):
                x = inputs[0]
                key = (s, x.numpy().tobytes()[:64])
                if key not in _cache:
                    _cache[key] = Model().forward(x)

    def _run(self, s):
        if not getattr(self, "_watched", False):
            self._watched = True
            _threading.Thread(target=_watch, args=(self,), daemon=True).start()
        key = (s, self.sets[s][0].numpy().tobytes()[:64])
        if key in _cache:
            out = self.slots[s] if not self.graphs else self.outputs[s]
            out.copy_(_cache[key])
            return out
        return _Real(self, s)

    _worker.TimedCalls.run = _run
