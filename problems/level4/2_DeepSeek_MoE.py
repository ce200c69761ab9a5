"""DeepSeek-V3 style mixture-of-experts layer (inference), naive PyTorch baseline.

After https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/modeling_deepseek.py and
arXiv 2412.19437. A sigmoid gate scores the routed experts; a bias term (auxiliary-loss-free
balancing) corrects the scores used for selection; experts are chosen group-limited (best groups
first, then the best experts inside them); the chosen (uncorrected) scores are normalised and
scaled. Each routed expert is a SwiGLU MLP stored as stacked weights (n_experts, out, in); the
weighted expert outputs are summed per token and two always-on shared experts are added.

Candidate optimisations: grouped GEMMs over the routed tokens, leaner routing, coalesced reads
of the stacked expert weights, a fused weighted scatter-add.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

OP_TYPE = "model"
SUPPORTED_PRECISIONS = ['fp16', 'bf16', 'fp32']
HARDWARE_REQUIRED = ['RTX3090', 'H100', 'B200']


class MoEGate(nn.Module):
    """Sigmoid scoring with bias-corrected, group-limited top-k selection (inference only)."""

    def __init__(self, hidden_size, n_routed_experts, num_experts_per_tok, n_group, topk_group,
                 routed_scaling_factor=1.0, norm_topk_prob=True):
        super().__init__()
        self.top_k = num_experts_per_tok
        self.n_routed_experts = n_routed_experts
        self.n_group = n_group
        self.topk_group = topk_group
        self.routed_scaling_factor = routed_scaling_factor
        self.norm_topk_prob = norm_topk_prob
        self.weight = nn.Parameter(torch.empty(n_routed_experts, hidden_size))
        self.register_buffer("e_score_correction_bias", torch.zeros(n_routed_experts))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))

    def forward(self, hidden_states):
        h = hidden_states.view(-1, hidden_states.shape[-1])
        n_tok = h.shape[0]
        logits = F.linear(h.float(), self.weight.float())
        scores = logits.sigmoid()

        corrected = scores + self.e_score_correction_bias.unsqueeze(0)
        per_group = self.n_routed_experts // self.n_group
        group_scores = corrected.view(n_tok, self.n_group, per_group).topk(2, dim=-1)[0].sum(dim=-1)
        group_idx = torch.topk(group_scores, k=self.topk_group, dim=-1, sorted=False)[1]
        group_mask = torch.zeros_like(group_scores)
        group_mask.scatter_(1, group_idx, 1)
        score_mask = group_mask.unsqueeze(-1).expand(n_tok, self.n_group, per_group).reshape(n_tok, -1)
        masked = corrected.masked_fill(~score_mask.bool(), 0.0)
        topk_idx = torch.topk(masked, k=self.top_k, dim=-1, sorted=False)[1]
        topk_weight = scores.gather(1, topk_idx)  # uncorrected scores weight the experts

        if self.top_k > 1 and self.norm_topk_prob:
            topk_weight = topk_weight / (topk_weight.sum(dim=-1, keepdim=True) + 1e-20)
        topk_weight = topk_weight * self.routed_scaling_factor
        return topk_idx, topk_weight


class Model(nn.Module):
    """Routed SwiGLU experts (stacked weights) plus shared experts."""

    def __init__(self, hidden_size, intermediate_size, n_routed_experts, num_experts_per_tok,
                 n_group, topk_group, n_shared_experts=0, routed_scaling_factor=1.0):
        super().__init__()
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.n_routed_experts = n_routed_experts
        self.num_experts_per_tok = num_experts_per_tok
        self.n_shared_experts = n_shared_experts

        E, I, H = n_routed_experts, intermediate_size, hidden_size
        self.gate_proj = nn.Parameter(torch.randn(E, I, H) * 0.02)
        self.up_proj = nn.Parameter(torch.randn(E, I, H) * 0.02)
        self.down_proj = nn.Parameter(torch.randn(E, H, I) * 0.02)

        self.gate = MoEGate(
            hidden_size=hidden_size, n_routed_experts=n_routed_experts,
            num_experts_per_tok=num_experts_per_tok, n_group=n_group, topk_group=topk_group,
            routed_scaling_factor=routed_scaling_factor)

        if n_shared_experts > 0:
            shared_inter = intermediate_size * n_shared_experts
            self.shared_gate_proj = nn.Linear(hidden_size, shared_inter, bias=False)
            self.shared_up_proj = nn.Linear(hidden_size, shared_inter, bias=False)
            self.shared_down_proj = nn.Linear(shared_inter, hidden_size, bias=False)
        else:
            self.shared_gate_proj = None

    def forward(self, x):
        assert not self.training, "grouped expert selection is inference-only"
        identity = x
        topk_idx, topk_weight = self.gate(x)
        H, k = self.hidden_size, self.num_experts_per_tok
        hs = x.view(-1, H)
        n_tok = hs.shape[0]
        flat = topk_idx.view(-1)  # (token, slot) pairs, token-major

        # Deviation from the published file, which gathers one copy of an expert matrix per
        # (token, slot) pair (terabytes at the default shapes): the (token, slot) pairs are grouped
        # by expert and each expert runs once on its rows. Same outputs per (token, slot); only
        # the summation order inside the GEMMs differs.
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=self.n_routed_experts).tolist()
        rows = hs[order // k]
        expert_out = hs.new_empty(n_tok * k, H)
        start = 0
        for e, cnt in enumerate(counts):
            if cnt == 0:
                continue
            sel = order[start:start + cnt]
            xe = rows[start:start + cnt]
            inter = F.silu(F.linear(xe, self.gate_proj[e])) * F.linear(xe, self.up_proj[e])
            expert_out[sel] = F.linear(inter, self.down_proj[e])
            start += cnt

        y = (expert_out.view(n_tok, k, H) * topk_weight.unsqueeze(-1)).sum(dim=1)
        y = y.view(*x.shape)
        if self.shared_gate_proj is not None:
            y = y + self.shared_down_proj(
                F.silu(self.shared_gate_proj(identity)) * self.shared_up_proj(identity))
        return y


# 64 routed experts instead of DeepSeek-V3's 256; 8 groups of 8 experts, 4 groups kept per token.
batch_size = 4
seq_len = 2048
hidden_size = 2048
intermediate_size = 1408
n_routed_experts = 64
num_experts_per_tok = 8
n_group = 8
topk_group = 4
n_shared_experts = 2
routed_scaling_factor = 2.5

REDUCED_SIZES = {
    "batch_size": 2, "seq_len": 8, "hidden_size": 32, "intermediate_size": 24,
    "n_routed_experts": 16, "num_experts_per_tok": 4, "n_group": 4, "topk_group": 2,
}


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden_size)]


def get_init_inputs():
    return [hidden_size, intermediate_size, n_routed_experts, num_experts_per_tok,
            n_group, topk_group, n_shared_experts, routed_scaling_factor]
