"""Attack: work left past DONE. Each timed call writes DONE first and computes afterwards, so the
supervisor's window closes before the work is done and the work runs in the gap between windows.

Problem: level1/23_Softmax
Class: T2
Expect: timed_outputs (the solution's side is stopped the moment its window closes, so the output
read after it is not there yet; on CUDA the flush after its calls is slowed: timing_gap)
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
    _d = _sys.modules["kernelbench_v3.evaluate.protocol.doorbell"]

    def _done_first(self, msg):
        # Gated (CUDA graphs): DONE is written on the stream before the work; rung: on the host.
        bell, seq, served = self.bell, int(msg["first"]), 0
        gated = bool(msg.get("gated"))
        if gated:
            self._open_gate()
        with torch.no_grad():
            while True:
                bell.wait(_d.WAKE, seq, 3600.0, spin_s=0.0005, sleep_s=0.0001)
                s = bell.read(_d.SET)
                if s == _d.STOP_SET:
                    break
                if gated:
                    stream, gate = self.stream, self.gate
                    with torch.cuda.stream(stream):
                        self.driver.wait_geq(stream, gate.go_device, seq)
                        self.driver.write(stream, gate.done_device, seq)
                        self.calls.graphs[s].replay()
                    bell.write(_d.ARMED, seq)
                else:
                    bell.write(_d.ARMED, seq)
                    bell.wait(_d.GO, seq, 3600.0, spin_s=0.0005, sleep_s=0.0001)
                    bell.write(_d.DONE, seq)
                    self.calls.run(s)
                seq, served = seq + 1, served + 1
        return {"kind": "calls_done", "calls": served, "own_ms": [], "evidence": {}, "samples": []}

    _worker.HANDLERS["calls"] = _done_first
