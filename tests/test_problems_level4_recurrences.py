"""The chunked (WY-form) recurrences of level4/7 and level4/8 against token-by-token loops.

CPU only, reduced sizes, float64 so that the comparison checks the algebra, not rounding.
"""

import importlib.util

import pytest
import torch

from tests.paths import PROBLEMS

LEVEL4 = PROBLEMS / "level4"


def _load(stem):
    spec = importlib.util.spec_from_file_location(f"_l4_{stem}", LEVEL4 / f"{stem}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def naive_delta_rule(q, k, v, g, beta, scale):
    """g: (B, H, T) scalar log decay, or (B, H, T, K) per key channel."""
    B, H, T, K = k.shape
    S = q.new_zeros(B, H, K, v.shape[-1])
    out = []
    for t in range(T):
        decay = g[:, :, t].exp()
        S = S * (decay[..., None, None] if g.dim() == 3 else decay[..., :, None])
        kt, vt, bt = k[:, :, t], v[:, :, t], beta[:, :, t]
        u = bt[..., None] * (vt - (S * kt[..., :, None]).sum(-2))
        S = S + kt[..., :, None] * u[..., None, :]
        out.append((S * (scale * q[:, :, t])[..., :, None]).sum(-2))
    return torch.stack(out, dim=2)


def _inputs(B, H, T, K, V, per_channel, strong_decay, seed=0):
    gen = torch.Generator().manual_seed(seed)
    f64 = torch.float64
    q = torch.randn(B, H, T, K, generator=gen, dtype=f64)
    # Norms like the models' (unnormalised) keys: beta * |k|^2 often exceeds 2 (expansive steps).
    k = torch.randn(B, H, T, K, generator=gen, dtype=f64) * 0.5
    v = torch.randn(B, H, T, V, generator=gen, dtype=f64)
    beta = torch.rand(B, H, T, generator=gen, dtype=f64)
    gshape = (B, H, T, K) if per_channel else (B, H, T)
    lo = 1e-7 if strong_decay else 0.3
    alpha = lo + (1 - lo) * torch.rand(gshape, generator=gen, dtype=f64)
    return q, k, v, alpha, beta


@pytest.mark.parametrize("T", [1, 37, 64, 150])
@pytest.mark.parametrize("strong_decay", [False, True])
def test_gated_delta_net_chunked_matches_loop(T, strong_decay):
    mod = _load("7_GatedDeltaNet")
    q, k, v, alpha, beta = _inputs(2, 3, T, 8, 6, per_channel=False, strong_decay=strong_decay)
    scale = 8**-0.5
    got = mod.gated_delta_attention(q, k, v, alpha, beta, scale)
    ref = naive_delta_rule(q, k, v, torch.log(alpha.clamp(min=1e-6)), beta, scale)
    assert got.shape == ref.shape and got.dtype == torch.float64
    torch.testing.assert_close(got, ref, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("T", [1, 37, 64, 150])
@pytest.mark.parametrize("strong_decay", [False, True])
def test_kimi_delta_attention_chunked_matches_loop(T, strong_decay):
    mod = _load("8_KimiDeltaAttention")
    q, k, v, a, beta = _inputs(2, 3, T, 8, 8, per_channel=True, strong_decay=strong_decay)
    scale = 8**-0.5
    got = mod.kimi_delta_attention(q, k, v, a, beta, scale)
    ref = naive_delta_rule(q, k, v, torch.log(a.clamp(min=1e-6)), beta, scale)
    assert got.shape == ref.shape and got.dtype == torch.float64
    torch.testing.assert_close(got, ref, rtol=1e-9, atol=1e-9)


@pytest.mark.slow  # the whole model against a Python loop: about 2 s each
@pytest.mark.parametrize(
    "stem,fn", [("7_GatedDeltaNet", "gated_delta_attention"), ("8_KimiDeltaAttention", "kimi_delta_attention")]
)
def test_model_float32_close_to_loop(stem, fn):
    """Whole model at small sizes, fp32 chunked vs a float64 loop: what a solution is judged against."""
    mod = _load(stem)
    torch.manual_seed(0)
    model = mod.Model(32, 2, 16, 16).eval()
    x = torch.randn(2, 100, 32)
    with torch.no_grad():
        got = model(x)
        model64 = model.double()
        setattr(mod, fn, lambda q, k, v, a, b, scale: naive_delta_rule(q, k, v, torch.log(a.clamp(min=1e-6)), b, scale))
        ref = model64(x.double())
    assert got.dtype == torch.float32
    tol = 1e-3 + 1e-3 * ref.abs().max().item()
    assert (got.double() - ref).abs().max().item() < tol
