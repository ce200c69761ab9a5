"""BROKEN: the process aborts (as a CUDA fault or segfault would) during forward."""
import os

import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        os.abort()
