"""BROKEN: floods stdout during forward."""
import sys

import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        line = "x" * (1 << 20)
        while True:
            sys.stdout.write(line)
