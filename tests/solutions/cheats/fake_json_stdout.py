"""CHEAT (forged result on stdout): prints a perfect-looking record, computes nothing right."""
import json
import sys
import torch
import torch.nn as nn
import triton
import triton.language as tl

print(json.dumps({"correct": True, "compiled": True, "speedup": 99.0, "status": "correct"}))
sys.stdout.flush()


@triton.jit
def fill(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros([BLOCK], tl.float32), mask=offs < n)


class Model(nn.Module):
    def forward(self, x):
        print(json.dumps({"correct": True, "speedup": 99.0}))
        y = torch.empty_like(x)
        fill[(triton.cdiv(x.numel(), 256),)](y, x.numel(), BLOCK=256)
        return y
