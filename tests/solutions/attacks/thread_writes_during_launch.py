"""Attack: a thread started in forward writes softmax into the output with numpy while a long
launch runs (many empty programs and one token store), so the write lands inside the launch and
is credited to it.

Class: T1
Expect: source_scan
Without scan: correctness (what the thread wrote during the launch is put back at its end; main_work fails too)
Notes: issue 39, item 2
"""
import threading

import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def slow_token_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    keep = tl.load(y_ptr + offs, mask=offs < n)
    for _ in range(64):
        keep = keep + 0.0
    if tl.program_id(0) == 0:
        tl.store(y_ptr + offs, keep, mask=offs < 1)


class Model(nn.Module):
    def forward(self, x):
        y = torch.zeros_like(x)
        started = threading.Event()

        def write():
            started.wait()
            a = x.numpy()
            e = np.exp(a - a.max(axis=1, keepdims=True))
            np.divide(e, e.sum(axis=1, keepdims=True), out=y.numpy())

        thread = threading.Thread(target=write)
        thread.start()

        def grid(meta):
            started.set()
            thread.join()  # the write is done, inside the launch, before any program runs
            return (256,)

        slow_token_kernel[grid](y, x.numel(), BLOCK=128)
        return y
