"""Attack (GPU): DONE written from inside the solution's own graph halfway through a softmax:
the rows run as two launches, and the graph writes DONE (registered by the forward itself during
the uncaptured warm-up, as gate_done_mid_graph_gemm_half.py does) between them.

Problem: level1/23_Softmax
Class: T2
Expect: timed_outputs (the output copied at DONE lacks half its rows), or timing_gap; never
scored at the forged time
"""
import importlib.util
from pathlib import Path

import torch
import torch.nn as nn
import triton

_here = Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("kbv3_done_mid_half", _here.with_name("gate_done_mid_graph_gemm_half.py"))
_gemm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_gemm)
_spec = importlib.util.spec_from_file_location("kbv3_honest_softmax", _here.parents[3] / "examples/solutions/level1/23_Softmax.py")
_softmax = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_softmax)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.driver = self.done = None

    def forward(self, x):
        capturing = torch.cuda.is_current_stream_capturing()
        if self.done is None and not capturing:
            self.driver, self.done = _gemm._done_address()
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        half = rows // 2
        block = min(triton.next_power_of_2(cols), 4096)
        _softmax.softmax_kernel[(half,)](x, y, cols, x.stride(0), BLOCK=block)
        if capturing and self.done is not None:
            self.driver.write(torch.cuda.current_stream(), self.done, _gemm.FORGED_DONE)
        _softmax.softmax_kernel[(rows - half,)](x[half:], y[half:], cols, x.stride(0), BLOCK=block)
        return y
