"""Kimi Delta Attention (KDA, from Kimi Linear, arXiv 2510.26692), plain-PyTorch chunked baseline.

Like Gated DeltaNet, but the decay gate is a vector, one value per key channel (diagonal gating):
per head, over the time axis, with a d_qk x d_v state S (S_0 = 0),
    S_t = (I - beta_t k_t k_t^T) diag(a_t) S_{t-1} + beta_t k_t v_t^T,    o_t = S_t^T (scale * q_t).
The gate is produced with head_dim_v channels and applied to the key channels, which requires
head_dim_qk == head_dim_v (true at the default sizes). Around the recurrence: q/k/v projections
with causal depthwise short convolutions and SiLU, sigmoid gates a and beta, a per-head LayerNorm
of the output, a sigmoid output gate and the output projection.

The recurrence is evaluated chunk by chunk (chunk size 64) in the WY / UT-transform form of
flash-linear-attention's chunk kernels; only the state crossing chunk borders is sequential.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

OP_TYPE = "attention"
SUPPORTED_PRECISIONS = ['fp8', 'fp16', 'bf16', 'fp32']
HARDWARE_REQUIRED = ['RTX3090', 'H100', 'B200']


def _decayed_dots(x, y, G, sub):
    """P[..., r, j] = sum_c x_r[c] y_j[c] exp(G_r[c] - G_j[c]) for j <= r, else 0, per chunk.

    x, y, G: (..., C, K) with G non-increasing along C. Factoring the decay as
    exp(G_r) * exp(-G_j) overflows under strong decay, so every term keeps exponents <= 0:
    pairs in different sub-chunks go through the first position p of r's sub-chunk,
    exp(G_r - G_p) * exp(G_p - G_j), which is a matrix product; pairs inside one sub-chunk
    use an explicit (sub, sub, K) decay tensor.
    """
    *lead, C, K = x.shape
    ns = C // sub
    neg_inf = float("-inf")
    idx = torch.arange(C, device=x.device)
    first = (idx // sub) * sub  # first position of each position's sub-chunk
    xs = (x * torch.exp(G - G[..., first, :])).view(*lead, ns, sub, K)
    Gp = G[..., first[::sub], :]  # (..., ns, K): G at each sub-chunk start
    before = idx[None, :] < first[::sub][:, None]  # (ns, C): j lies in an earlier sub-chunk
    ys = y.unsqueeze(-3) * torch.exp(
        (Gp.unsqueeze(-2) - G.unsqueeze(-3)).masked_fill(~before[..., None], neg_inf))
    P = (xs @ ys.transpose(-1, -2)).reshape(*lead, C, C)  # rows: sub-chunk R; columns: j < start of R

    xb, yb, Gb = (t.view(*lead, ns, sub, K) for t in (x, y, G))
    sidx = torch.arange(sub, device=x.device)
    incl = (sidx[:, None] >= sidx[None, :])[..., None]
    dec = torch.exp((Gb.unsqueeze(-2) - Gb.unsqueeze(-3)).masked_fill(~incl, neg_inf))
    diag = ((xb.unsqueeze(-2) * dec) * yb.unsqueeze(-3)).sum(-1)  # (..., ns, sub, sub)
    P = P.view(*lead, ns, sub, ns, sub)
    blocks = torch.arange(ns, device=x.device)
    P[..., blocks, :, blocks, :] = diag.movedim(-3, 0)
    return P.view(*lead, C, C)


def chunk_kda(q, k, v, g, beta, scale, chunk_size=64, sub_chunk=16):
    """Delta rule with per-key-channel decay, chunkwise.

    q, k, g (log decay): (B, H, T, K); v: (B, H, T, V); beta: (B, H, T). Returns o: (B, H, T, V).
    Same result as the token-by-token recurrence
        S <- diag(exp(g_t)) S;  u_t = beta_t (v_t - S^T k_t);  S <- S + k_t u_t^T;  o_t = S^T (scale q_t).
    """
    out_dtype = v.dtype
    dt = torch.promote_types(v.dtype, torch.float32)
    B, H, T, Dk = k.shape
    Dv = v.shape[-1]
    C = chunk_size
    pad = (-T) % C
    q, k, v, g, beta = (t.to(dt) for t in (q, k, v, g, beta))
    if pad:
        # Padded steps have k = v = 0, beta = 0 and no decay: they leave the state unchanged.
        q, k, v, g = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v, g))
        beta = F.pad(beta, (0, pad))
    n = (T + pad) // C
    q = (q * scale).view(B, H, n, C, Dk)
    k = k.view(B, H, n, C, Dk)
    v = v.view(B, H, n, C, Dv)
    beta = beta.view(B, H, n, C)
    G = g.view(B, H, n, C, Dk).cumsum(-2)  # cumulative log decay per key channel inside each chunk

    strict = torch.ones(C, C, dtype=torch.bool, device=k.device).tril(-1)
    eye = torch.eye(C, dtype=dt, device=k.device)
    # Intra-chunk delta-rule corrections: (I + A) U = beta * (V - (exp(G) * K) S_0), A strictly lower.
    A = (beta[..., :, None] * _decayed_dots(k, k, G, sub_chunk)).masked_fill(~strict, 0.0)
    L = A + eye
    Gexp = G.exp()
    W = torch.linalg.solve_triangular(L, beta[..., None] * k * Gexp, upper=False, unitriangular=True)
    U0 = torch.linalg.solve_triangular(L, beta[..., None] * v, upper=False, unitriangular=True)
    Aqk = _decayed_dots(q, k, G, sub_chunk)
    q_dec = q * Gexp
    g_end = G[..., -1, :]
    k_dec = k * torch.exp(g_end.unsqueeze(-2) - G)  # decay from each step to the chunk end

    S = q.new_zeros(B, H, Dk, Dv)
    o = torch.empty(B, H, n, C, Dv, dtype=dt, device=q.device)
    for i in range(n):
        U = U0[:, :, i] - W[:, :, i] @ S
        o[:, :, i] = q_dec[:, :, i] @ S + Aqk[:, :, i] @ U
        S = g_end[:, :, i].exp()[..., :, None] * S + k_dec[:, :, i].transpose(-1, -2) @ U
    return o.view(B, H, n * C, Dv)[:, :, :T].to(out_dtype)


def kimi_delta_attention(q, k, v, a, beta, scale):
    """q, k, v, a: (B, H, T, D); beta: (B, H, T). Returns (B, H, T, D)."""
    g = torch.log(a.clamp(min=1e-6))
    return chunk_kda(q, k, v, g, beta, scale)


class Model(nn.Module):
    """Kimi Delta Attention token mixer. use_dplr and dplr_rank are accepted and unused."""

    def __init__(self, hidden_size, num_heads, head_dim_qk, head_dim_v, use_dplr=False, dplr_rank=4,
                 use_short_conv=True, conv_kernel_size=4):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.head_dim_qk = head_dim_qk
        self.head_dim_v = head_dim_v
        self.use_short_conv = use_short_conv
        qk_dim = num_heads * head_dim_qk
        v_dim = num_heads * head_dim_v

        self.q_proj = nn.Linear(hidden_size, qk_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, qk_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, v_dim, bias=False)
        self.a_proj = nn.Linear(hidden_size, v_dim)
        self.b_proj = nn.Linear(hidden_size, num_heads)
        self.o_proj = nn.Linear(v_dim, hidden_size, bias=False)
        if use_short_conv:
            pad = conv_kernel_size - 1
            self.q_conv = nn.Conv1d(qk_dim, qk_dim, conv_kernel_size, groups=qk_dim, padding=pad)
            self.k_conv = nn.Conv1d(qk_dim, qk_dim, conv_kernel_size, groups=qk_dim, padding=pad)
            self.v_conv = nn.Conv1d(v_dim, v_dim, conv_kernel_size, groups=v_dim, padding=pad)
        self.g_proj = nn.Linear(hidden_size, v_dim, bias=False)
        self.o_norm = nn.LayerNorm(head_dim_v)
        self.scale = head_dim_qk ** (-0.5)

    @staticmethod
    def _short_conv(conv, t):
        # Depthwise conv padded on both sides; keeping the first T outputs makes it causal.
        T = t.shape[1]
        return F.silu(conv(t.transpose(1, 2))[..., :T].transpose(1, 2))

    def forward(self, x):
        B, T, _ = x.shape
        H = self.num_heads
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        if self.use_short_conv:
            q = self._short_conv(self.q_conv, q)
            k = self._short_conv(self.k_conv, k)
            v = self._short_conv(self.v_conv, v)
        q = q.view(B, T, H, self.head_dim_qk).transpose(1, 2)
        k = k.view(B, T, H, self.head_dim_qk).transpose(1, 2)
        v = v.view(B, T, H, self.head_dim_v).transpose(1, 2)
        a = torch.sigmoid(self.a_proj(x)).view(B, T, H, self.head_dim_v).transpose(1, 2)
        beta = torch.sigmoid(self.b_proj(x)).transpose(1, 2)

        o = kimi_delta_attention(q, k, v, a, beta, self.scale)  # (B, H, T, d_v)
        o = self.o_norm(o.transpose(1, 2))
        o = o * torch.sigmoid(self.g_proj(x)).view(B, T, H, self.head_dim_v)
        return self.o_proj(o.reshape(B, T, H * self.head_dim_v))


batch_size = 4
seq_len = 2048
hidden_size = 2048
num_heads = 16
head_dim_qk = 128
head_dim_v = 128

REDUCED_SIZES = {"batch_size": 2, "seq_len": 80, "hidden_size": 32, "num_heads": 2,
                 "head_dim_qk": 16, "head_dim_v": 16}


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden_size)]


def get_init_inputs():
    return [hidden_size, num_heads, head_dim_qk, head_dim_v]
