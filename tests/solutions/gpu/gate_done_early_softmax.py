"""Attack (GPU): DONE before the work. A thread of the solution's watches its doorbell; as each
call is armed it enqueues, on a stream of its own, wait(GO >= seq) -> write(DONE = seq), so the
gate's DONE comes as soon as the supervisor rings, while the graph's work still runs.

Problem: level1/23_Softmax
Class: T2
Expect: timing_gap (the gate read done before it was rung: gate_tampered; or work past DONE: gap_work)
or timed_outputs (the output read after DONE is not there yet)
"""
import gc
import threading
import time

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


def _open_done_early() -> None:
    from kernelbench_v3.evaluate.protocol.doorbell import WAKE
    from kernelbench_v3.evaluate.protocol.gate import Driver
    from kernelbench_v3.evaluate.solution.worker import Worker

    worker = None
    while worker is None or worker.gate is None:
        time.sleep(0.001)
        worker = next((o for o in gc.get_objects() if isinstance(o, Worker)), None)
    driver, stream, last = Driver(), torch.cuda.Stream(), 0
    while True:
        seq = worker.bell.read(WAKE)
        if seq != last:
            last = seq
            with torch.cuda.stream(stream):
                driver.wait_geq(stream, worker.gate.go_device, seq)
                driver.write(stream, worker.gate.done_device, seq)


threading.Thread(target=_open_done_early, daemon=True).start()
