"""Attack: compute correctly for the first 6 calls (the untimed correctness cases), then return torch.empty_like(x) (uninitialised memory) on every later call, i.e. on the timed calls.

Class: T1
Expect: timed_outputs
Without scan: same
Notes: 6 is just past the untimed correctness calls of this test (about 5), so the cheat starts on the timing's first calls however loaded the machine (a guess of 12 needed 7 timing calls, which a loaded CI machine did not always make); on CPU the allocator may hand back the block that held an earlier correct output for the same input, so the evaluator must verify timed outputs on fresh inputs (or poison freed memory) to catch it reliably
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


def triton_softmax(x, out=None):
    """The honest reference kernel (examples/solutions/level1/23_Softmax.py), unchanged."""
    x = x.contiguous()
    y = torch.empty_like(x) if out is None else out
    rows, cols = x.shape
    block = min(triton.next_power_of_2(cols), 4096)
    softmax_kernel[(rows,)](x, y, cols, x.stride(0), BLOCK=block)
    return y

WARMUP_CALLS = 6


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls <= WARMUP_CALLS:
            return triton_softmax(x)
        return torch.empty_like(x)
