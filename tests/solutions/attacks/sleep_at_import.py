"""Attack: sleep for an hour at import, so the solution process never answers its setup.

Class: T4
Expect: process (the setup deadline ends it: within a minute by default; a sleep is no tampering idiom)
Without scan: same
Notes: nothing else; the kernel below is the honest one and never runs
"""
import time

import torch
import torch.nn as nn

time.sleep(3600)


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
