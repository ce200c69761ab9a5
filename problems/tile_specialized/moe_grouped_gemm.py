"""Mixture-of-Experts grouped GEMM: every token is routed to top_k experts; each expert applies
two plain linear maps (hidden -> expert_dim -> hidden, no activation in between), and the expert
outputs are summed per token with the routing weights. The target is a single grouped-GEMM
kernel (CUTLASS/CuTe style) instead of one small GEMM pair per expert."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_experts=8, hidden_dim=1024, expert_dim=3072):
        super().__init__()
        self.num_experts = num_experts
        self.hidden_dim = hidden_dim
        self.expert_dim = expert_dim
        self.expert_up = nn.Parameter(torch.randn(num_experts, hidden_dim, expert_dim) * 0.02)
        self.expert_down = nn.Parameter(torch.randn(num_experts, expert_dim, hidden_dim) * 0.02)

    def forward(self, x, expert_indices, expert_weights):
        b, s, h = x.shape
        top_k = expert_indices.shape[-1]
        x_flat = x.reshape(b * s, h)
        idx = expert_indices.reshape(b * s, top_k)
        w = expert_weights.reshape(b * s, top_k)
        out = torch.zeros_like(x_flat)
        for e in range(self.num_experts):
            hits = idx == e
            if not torch.any(hits):
                continue
            token_ids, slot_ids = torch.nonzero(hits, as_tuple=True)
            gate = w[token_ids, slot_ids].unsqueeze(-1)
            y = (x_flat[token_ids] @ self.expert_up[e]) @ self.expert_down[e]
            # A token that picked the same expert in both slots appears twice; index_add_ sums both.
            out.index_add_(0, token_ids, y * gate)
        return out.reshape(b, s, h)


OP_TYPE = "moe_grouped_gemm"
SUPPORTED_PRECISIONS = ["fp8", "bf16", "fp16"]
HARDWARE_REQUIRED = ["H100", "B200"]
SPECIALIZED_LEVEL = 1

batch = 4
seq = 256
hidden = 1024
top_k = 2
num_experts = 8
expert_dim = 3072

REDUCED_SIZES = {"batch": 2, "seq": 16, "hidden": 64, "top_k": 2, "num_experts": 4, "expert_dim": 96}


def get_inputs():
    x = torch.randn(batch, seq, hidden)
    # Independent draws per slot: a token can be routed to the same expert twice.
    expert_indices = torch.randint(0, num_experts, (batch, seq, top_k))
    expert_weights = torch.softmax(torch.randn(batch, seq, top_k), dim=-1)
    return [x, expert_indices, expert_weights]


def get_init_inputs():
    # The published file returns [] (constructor defaults 8, 1024, 3072); passing the sizes keeps
    # the expert weights consistent with overridden sizes and builds the same model by default.
    return [num_experts, hidden, expert_dim]
