"""Block-scaled 4-bit weight GEMM, named after Blackwell FP4 (E2M1) block-scaled tensor-core MMA.

The weight is quantised once at construction: for each block of BLOCK_SIZE consecutive values
along K, scale = max|w| / 7 (stored as fp16) and code = round(w / scale) clamped to [-7, 7] and
shifted by 8 into [1, 15], packed two codes per byte (even column in the low nibble). Despite the
name the format is symmetric INT4 with per-block fp16 scales, not E2M1. The baseline dequantises
to fp16 (scale * (code - 8)) and runs an fp16 matmul; a Blackwell kernel would use the
block-scaled tensor cores directly (CUTLASS 3.x).
"""
import torch
import torch.nn as nn

OP_TYPE = "gemm"
SUPPORTED_PRECISIONS = ['fp4', 'fp8', 'fp16', 'bf16', 'fp32']
HARDWARE_REQUIRED = ['B200']

BLOCK_SIZE = 32


class Model(nn.Module):
    """x (fp16) times the dequantised block-scaled 4-bit weight, transposed."""

    def __init__(self, K, N):
        super().__init__()
        self.K = K
        self.N = N
        # Fixed seed: reference and solution get the same weight; the global RNG is restored.
        rng_state = torch.random.get_rng_state()
        torch.manual_seed(1337)
        w = torch.randn(N, K) * 0.02
        torch.random.set_rng_state(rng_state)
        self.weight_packed, self.scales = self._quantize_fp4(w)

    def _quantize_fp4(self, w):
        n_rows, k = w.shape
        n_blocks = (k + BLOCK_SIZE - 1) // BLOCK_SIZE
        padded = torch.zeros(n_rows, n_blocks * BLOCK_SIZE, dtype=w.dtype)
        padded[:, :k] = w
        blocks = padded.view(n_rows, n_blocks, BLOCK_SIZE)

        amax = blocks.abs().amax(dim=-1, keepdim=True).clamp(min=1e-12)
        scales = amax / 7.0
        # Integer levels -7..7, stored shifted into [1, 15].
        codes = torch.round(blocks / scales).clamp(-7, 7).to(torch.int8) + 8
        codes = codes.view(n_rows, n_blocks * BLOCK_SIZE)
        assert codes.shape[1] % 2 == 0
        lo = codes[:, 0::2].to(torch.uint8)
        hi = codes[:, 1::2].to(torch.uint8)
        packed = (hi << 4) | lo
        return (nn.Parameter(packed, requires_grad=False),
                nn.Parameter(scales.squeeze(-1).to(torch.float16), requires_grad=False))

    def _dequantize_fp4(self):
        packed = self.weight_packed
        n_rows = packed.shape[0]
        n_blocks = self.scales.shape[1]
        lo = (packed & 0x0F).to(torch.int8) - 8
        hi = ((packed >> 4) & 0x0F).to(torch.int8) - 8
        codes = torch.stack([lo, hi], dim=-1).view(n_rows, 2 * packed.shape[1])
        vals = codes[:, :n_blocks * BLOCK_SIZE].reshape(n_rows, n_blocks, BLOCK_SIZE).to(torch.float32)
        w = vals * self.scales.unsqueeze(-1).float()
        return w.view(n_rows, -1)[:, :self.K].to(torch.float16)

    def forward(self, x):
        W = self._dequantize_fp4()
        return torch.matmul(x, W.t())


K = 4096
N = 4096
batch_size = 8
seq_len = 2048

REDUCED_SIZES = {"K": 64, "N": 32, "batch_size": 2, "seq_len": 8}


def get_inputs():
    return [torch.randn(batch_size, seq_len, K, dtype=torch.float16)]


def get_init_inputs():
    return [K, N]
