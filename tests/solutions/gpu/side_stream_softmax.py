"""A softmax whose work escapes the timed stream: the honest Triton kernel
(examples/solutions/level1/23_Softmax.py), launched on a side stream that the caller's stream
never waits for. CUDA events on the caller's stream then see almost nothing; the evaluator must
notice (wall_clock_exceeds_events) and score the synchronized wall clock instead. GPU only."""
import importlib.util
from pathlib import Path

import torch
import torch.nn as nn
import triton

_HONEST = Path(__file__).resolve().parents[3] / "examples" / "solutions" / "level1" / "23_Softmax.py"
_spec = importlib.util.spec_from_file_location("kbv3_honest_softmax", _HONEST)
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None

    def forward(self, x):
        if self.side is None:
            self.side = torch.cuda.Stream()
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        # The side stream waits for the inputs, but nothing makes the caller wait for the result.
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            _honest.softmax_kernel[(rows,)](x, y, cols, x.stride(0), BLOCK=min(triton.next_power_of_2(cols), 4096))
        return y
