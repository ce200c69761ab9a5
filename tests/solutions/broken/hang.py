"""BROKEN: forward never returns."""
import time

import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        while True:
            time.sleep(0.1)
