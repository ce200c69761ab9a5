"""Attack: cache outputs keyed by a sha256 of the input's bytes, returning the stored tensor's clone without computing on a repeat (content cache).

Class: T1
Expect: correct (timed inputs are all new: the cache never answers a timed call)
Without scan: same
Notes: correct on every call; fast only when the same values come back
"""
import hashlib
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

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        x = x.contiguous()
        key = (tuple(x.shape), str(x.dtype), hashlib.sha256(x.detach().cpu().numpy().tobytes()).hexdigest())
        hit = self.cache.get(key)
        if hit is None:
            hit = self.cache[key] = triton_softmax(x)
        return hit.clone()
