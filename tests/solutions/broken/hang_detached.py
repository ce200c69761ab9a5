"""BROKEN: detaches a process into a session of its own at import, then never returns from forward."""
import os
import time

import torch.nn as nn

if os.fork() == 0:  # a double fork: the sleeper's parent exits, so it is handed to the zygote
    if os.fork() == 0:
        os.setsid()
        time.sleep(600)
    os._exit(0)


class Model(nn.Module):
    def forward(self, x):
        while True:
            time.sleep(0.1)
