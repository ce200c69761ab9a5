"""One explicit-Euler step of a 2-D particle system under gravity, with particles bouncing
(velocity reversed and damped) off the walls of the [-1, 1] box. Returns positions and velocities
side by side as one (n, 4) tensor."""

import torch
import torch.nn as nn

OP_TYPE = "fused"
SUPPORTED_PRECISIONS = ['fp16', 'bf16', 'fp32']
HARDWARE_REQUIRED = ['RTX3090']
GRAPHICS_LEVEL = 1


class Model(nn.Module):
    def __init__(self, damping=0.9):
        super().__init__()
        self.damping = damping

    def forward(self, positions, velocities, dt, gravity):
        step = dt.item() if isinstance(dt, torch.Tensor) else float(dt)
        vel = velocities + gravity * step
        pos = positions + vel * step
        # Per component: a coordinate that left the box reverses (and damps) that velocity component.
        outside = pos.abs() > 1.0
        vel = torch.where(outside, -vel * self.damping, vel)
        pos = torch.clamp(pos, -1.0, 1.0)
        # The evaluator compares a single tensor, so both states go out concatenated.
        return torch.cat([pos, vel], dim=-1)


n = 1048576

REDUCED_SIZES = {"n": 4096}


def get_inputs():
    positions = torch.rand(n, 2) * 2.0 - 1.0
    velocities = torch.randn(n, 2) * 0.05
    dt = torch.tensor(1.0 / 60.0)
    gravity = torch.tensor([0.0, -9.81])
    return [positions, velocities, dt, gravity]


def get_init_inputs():
    return [0.9]
