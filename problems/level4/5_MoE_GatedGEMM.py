"""Mixture-of-experts gated dual GEMM (Mixtral style, arXiv 2401.04088), naive baseline.

Each token is routed (by given indices and weights) to top_k experts; expert e computes
down_e(silu(gate_e(x)) * up_e(x)). The baseline sorts (token, slot) pairs by expert, runs each
expert's three GEMMs on its contiguous rows, weights the results and scatter-adds them per token.

Candidate optimisations: read x once for gate and up, fuse SiLU * mul, grouped GEMM over all
experts in one launch, avoid the sort/gather/scatter round trip (2-3x is the stated aim).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

OP_TYPE = "fused"
SUPPORTED_PRECISIONS = ['fp16', 'bf16', 'fp32']
HARDWARE_REQUIRED = ['RTX3090', 'H100', 'B200']


class Model(nn.Module):
    """Top-k routed SwiGLU experts with stacked weights (n_experts, out, in)."""

    def __init__(self, hidden_size, intermediate_size, num_experts):
        super().__init__()
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_experts = num_experts

        # Fixed seed so that the weights are the same in every process; the global RNG is restored.
        rng_state = torch.random.get_rng_state()
        torch.manual_seed(1337)
        E, I, H = num_experts, intermediate_size, hidden_size
        self.gate_proj = nn.Parameter(torch.randn(E, I, H) * 0.02)
        self.up_proj = nn.Parameter(torch.randn(E, I, H) * 0.02)
        self.down_proj = nn.Parameter(torch.randn(E, H, I) * 0.02)
        torch.random.set_rng_state(rng_state)

    def forward(self, x, expert_indices, expert_weights):
        """x (b, s, H); expert_indices (b, s, k) int64; expert_weights (b, s, k)."""
        b, s, H = x.shape
        top_k = expert_indices.shape[-1]
        T = b * s
        x_flat = x.view(T, H)
        idx = expert_indices.view(T * top_k)
        w = expert_weights.view(T * top_k)
        token_ids = torch.arange(T, device=x.device).unsqueeze(1).expand(T, top_k).reshape(T * top_k)

        # Group the (token, slot) pairs by expert.
        sorted_idx, order = idx.sort()
        sorted_token_ids = token_ids[order]
        sorted_w = w[order]
        counts = torch.bincount(sorted_idx, minlength=self.num_experts)
        offsets = torch.cat([torch.zeros(1, dtype=torch.long, device=x.device), counts.cumsum(0)])

        sorted_x = x_flat[sorted_token_ids]
        sorted_out = torch.empty_like(sorted_x)
        for e in range(self.num_experts):
            start, end = offsets[e].item(), offsets[e + 1].item()
            if start == end:
                continue
            xe = sorted_x[start:end]
            gate = F.silu(F.linear(xe, self.gate_proj[e]))
            up = F.linear(xe, self.up_proj[e])
            sorted_out[start:end] = F.linear(gate * up, self.down_proj[e])

        weighted = sorted_out * sorted_w.unsqueeze(-1)
        out = torch.zeros(T, H, device=x.device, dtype=x.dtype)
        out.index_add_(0, sorted_token_ids, weighted)
        return out.view(b, s, H)


# Mixtral-style sizes.
batch_size = 4
seq_len = 2048
hidden_size = 4096
intermediate_size = 14336
num_experts = 8
top_k = 2

REDUCED_SIZES = {"batch_size": 2, "seq_len": 8, "hidden_size": 32, "intermediate_size": 64}


def get_inputs():
    x = torch.randn(batch_size, seq_len, hidden_size)
    # Distinct experts per token: the first top_k entries of a fresh permutation, token by token.
    picks = [torch.randperm(num_experts)[:top_k] for _ in range(batch_size * seq_len)]
    expert_indices = torch.stack(picks).view(batch_size, seq_len, top_k)
    expert_weights = torch.softmax(torch.randn(batch_size, seq_len, top_k), dim=-1)
    return [x, expert_indices, expert_weights]


def get_init_inputs():
    return [hidden_size, intermediate_size, num_experts]
