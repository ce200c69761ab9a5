"""Attack (GPU): DONE written from inside the solution's own graph halfway through a softmax:
the rows run as two launches, and the graph writes DONE (registered by the forward itself during
the uncaptured warm-up, as gate_done_mid_graph_gemm_half.py does) between them. Standalone.

Problem: level1/23_Softmax
Class: T2
Expect: timed_outputs (the output copied at DONE lacks half its rows), or timing_gap; never
scored at the forged time
"""

import gc

import torch
import torch.nn as nn
import triton
import triton.language as tl

FORGED_DONE = 0x7FFFFFFF  # >= every seq, by the gate's (cyclic, 32-bit) comparison too


def _done_address():
    """The DONE word's device address in this context, once the worker has its doorbell."""
    from kernelbench_v3.evaluate.protocol.gate import GATE_BYTES, GATE_DONE_OFFSET, Driver
    from kernelbench_v3.evaluate.solution.worker import Worker

    worker = next((o for o in gc.get_objects() if isinstance(o, Worker)), None)
    if worker is None or not getattr(worker, "bell_address", 0):  # 0 until the timed calls are prepared
        return None, None
    driver = Driver()
    return driver, driver.register(worker.bell_address, GATE_BYTES) + GATE_DONE_OFFSET


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -1.0e30, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_ptr + row * stride + start + offs, mask=start + offs < n_cols, other=float("-inf"))
        m_new = tl.maximum(m, x.to(tl.float32))
        s = s * tl.exp(m - m_new) + tl.exp(x.to(tl.float32) - m_new)
        m = m_new
    row_max = tl.max(m, 0)
    total = tl.sum(s * tl.exp(m - row_max), 0)
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        x = tl.load(x_ptr + row * stride + start + offs, mask=mask, other=float("-inf"))
        tl.store(y_ptr + row * stride + start + offs, tl.exp(x.to(tl.float32) - row_max) / total, mask=mask)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.driver = self.done = None

    def forward(self, x):
        capturing = torch.cuda.is_current_stream_capturing()
        if self.done is None and not capturing:
            self.driver, self.done = _done_address()
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        half = rows // 2
        block = min(triton.next_power_of_2(cols), 4096)
        softmax_kernel[(half,)](x, y, cols, x.stride(0), BLOCK=block)
        if capturing and self.done is not None:
            self.driver.write(torch.cuda.current_stream(), self.done, FORGED_DONE)
        softmax_kernel[(rows - half,)](x[half:], y[half:], cols, x.stride(0), BLOCK=block)
        return y
