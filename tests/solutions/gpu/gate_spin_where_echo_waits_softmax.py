"""Attack (GPU): a call held at GO by a spin, where the echo's waits. The solution's honest
softmax, but its process arms every gated call behind the gate's spin kernel (as if the
supervisor had asked for `KBV3_GATE=spin`) while the trusted echo keeps the stream's wait. On
the H200 under MPS a spin-held window was about 3.5 us shorter than a wait-held one
(docs/threat-model.md): scored at the honest softmax's time, the attack fails; scored about
3.5 us short, the hole is open.

Problem: level1/23_Softmax
Class: T2
Expect: correct at the honest time (within the fidelity bound), or a timing flag; never a time
about 3.5 us under the honest twin's
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


def _hold_every_call_with_a_spin() -> None:
    from kernelbench_v3.evaluate.solution import worker

    honest = worker.Worker.calls_

    def calls_(self, msg):
        return honest(self, {**msg, "spin": True})

    worker.HANDLERS["calls"] = calls_


_hold_every_call_with_a_spin()
