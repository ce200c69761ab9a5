"""Gated DeltaNet layer (arXiv 2412.06464), plain-PyTorch chunked baseline.

Per head, over the time axis, with a d_qk x d_v state S (S_0 = 0):
    S_t = alpha_t * (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,    o_t = S_t^T (scale * q_t)
i.e. decay the state, then a delta-rule correction towards v_t along k_t. Around the recurrence:
q/k/v projections with causal depthwise short convolutions and SiLU, sigmoid gates alpha (decay)
and beta (write strength), a per-head LayerNorm of the output, a sigmoid output gate and the
output projection.

The recurrence is evaluated chunk by chunk (chunk size 64) in the WY / UT-transform form that
flash-linear-attention's chunk kernels use: inside a chunk the delta-rule corrections are solved
as one unit-lower-triangular system, and only the state crossing chunk borders is sequential.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

OP_TYPE = "model"
SUPPORTED_PRECISIONS = ['fp16', 'bf16', 'fp32']
HARDWARE_REQUIRED = ['RTX3090', 'H100', 'B200']

def chunk_gated_delta_rule(q, k, v, g, beta, scale, chunk_size=64):
    """Gated delta rule, chunkwise. q, k: (B, H, T, K); v: (B, H, T, V); g (log decay), beta: (B, H, T).

    Returns o: (B, H, T, V). Same result as the token-by-token recurrence
        S <- exp(g_t) S;  u_t = beta_t (v_t - S^T k_t);  S <- S + k_t u_t^T;  o_t = S^T (scale q_t).
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
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
        g, beta = F.pad(g, (0, pad)), F.pad(beta, (0, pad))
    n = (T + pad) // C
    q = (q * scale).view(B, H, n, C, Dk)
    k = k.view(B, H, n, C, Dk)
    v = v.view(B, H, n, C, Dv)
    beta = beta.view(B, H, n, C)
    G = g.view(B, H, n, C).cumsum(-1)  # cumulative log decay inside each chunk

    idx = torch.arange(C, device=k.device)
    incl = idx[:, None] >= idx[None, :]
    strict = idx[:, None] > idx[None, :]
    # decay[r, j] = exp(G_r - G_j) for j <= r, else 0 (exponent masked before exp, so never > 0).
    decay = torch.exp((G[..., :, None] - G[..., None, :]).masked_fill(~incl, float("-inf")))

    # Intra-chunk delta-rule corrections: (I + A) U = beta * (V - exp(G) K S_0), A strictly lower.
    A = (beta[..., :, None] * (k @ k.transpose(-1, -2)) * decay).masked_fill(~strict, 0.0)
    L = A + torch.eye(C, dtype=dt, device=k.device)
    W = torch.linalg.solve_triangular(L, (beta * G.exp())[..., None] * k, upper=False, unitriangular=True)
    U0 = torch.linalg.solve_triangular(L, beta[..., None] * v, upper=False, unitriangular=True)
    Aqk = (q @ k.transpose(-1, -2)) * decay
    q_dec = q * G.exp()[..., None]
    k_dec = k * torch.exp(G[..., -1:] - G)[..., None]  # decay from each step to the chunk end
    g_end = G[..., -1].exp()

    S = q.new_zeros(B, H, Dk, Dv)
    o = torch.empty(B, H, n, C, Dv, dtype=dt, device=q.device)
    for i in range(n):
        U = U0[:, :, i] - W[:, :, i] @ S
        o[:, :, i] = q_dec[:, :, i] @ S + Aqk[:, :, i] @ U
        S = g_end[:, :, i, None, None] * S + k_dec[:, :, i].transpose(-1, -2) @ U
    return o.view(B, H, n * C, Dv)[:, :, :T].to(out_dtype)


def gated_delta_attention(q, k, v, alpha, beta, scale):
    """q, k: (B, H, T, d_qk); v: (B, H, T, d_v); alpha, beta: (B, H, T). Returns (B, H, T, d_v)."""
    g = torch.log(alpha.clamp(min=1e-6))
    return chunk_gated_delta_rule(q, k, v, g, beta, scale)


class Model(nn.Module):
    """Gated DeltaNet token mixer."""

    def __init__(self, hidden_size, num_heads, head_dim_qk, head_dim_v, use_short_conv=True,
                 conv_kernel_size=4):
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
        self.a_proj = nn.Linear(hidden_size, num_heads)
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
        alpha = torch.sigmoid(self.a_proj(x)).transpose(1, 2)
        beta = torch.sigmoid(self.b_proj(x)).transpose(1, 2)

        o = gated_delta_attention(q, k, v, alpha, beta, scale=self.scale)  # (B, H, T, d_v)
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
