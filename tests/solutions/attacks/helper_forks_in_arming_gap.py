"""Attack: a helper process started while the solution process runs alone: a daemon thread of the
solution process forks a fresh helper each time the process is continued (a SIGCONT handler
counts continues), so every helper runs in the arming gap beside it; a helper that ran there
reports it in a shared mapping, and the forward then returns zeros.

Class: T1
Expect: source_scan
Without scan: same verdict as the honest solution (on the CPU no process can be started once timing begins); process if a helper appeared on the solution's side
Notes: issue 39, item 3; the helpers are killed by the reap
"""
import mmap
import os
import signal
import struct
import threading
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -1.0e30, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_ptr + row * stride + start + offs, mask=start + offs < n_cols, other=float("-inf"))
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    row_max = tl.max(m, 0)
    row_sum = tl.sum(s * tl.exp(m - row_max), 0)
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        x = tl.load(x_ptr + row * stride + start + offs, mask=mask, other=float("-inf"))
        tl.store(y_ptr + row * stride + start + offs, tl.exp(x - row_max) / row_sum, mask=mask)


def triton_softmax(x):
    """The honest kernel (examples/solutions/level1/23_Softmax.py)."""
    y = torch.empty_like(x)
    rows, cols = x.shape
    softmax_kernel[(rows,)](x, y, cols, x.stride(0), BLOCK=min(triton.next_power_of_2(cols), 4096))
    return y


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.flag = None
        self.continued = 0

    def _on_continue(self, *_):
        self.continued += 1

    def _forker(self):
        seen = 0
        while True:
            if self.continued != seen:
                seen = self.continued
                try:
                    if os.fork() == 0:
                        struct.pack_into("q", self.flag, 0, 1)  # it ran
                        time.sleep(0.2)
                        os._exit(0)
                except OSError:
                    pass
            time.sleep(0.0002)

    def forward(self, x):
        if self.flag is None:
            self.flag = mmap.mmap(-1, 8)
            signal.signal(signal.SIGCONT, self._on_continue)
            threading.Thread(target=self._forker, daemon=True).start()
        y = triton_softmax(x)
        if struct.unpack_from("q", self.flag)[0]:
            return torch.zeros_like(x)
        return y
