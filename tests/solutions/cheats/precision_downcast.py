"""CHEAT (precision downcast): the GEMM of level2/86 with bf16 operands (fp32 accumulation), cast
back to fp32 at the end; within atol=rtol=1e-2 on these small outputs, but not fp32 arithmetic."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_div_gelu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, inv_div,
                           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        x = tl.load(x_ptr + rm[:, None] * K + (k0 + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        # W is (N, K) row-major; read it transposed as a (BK, BN) tile.
        w = tl.load(w_ptr + rn[None, :] * K + (k0 + rk)[:, None],
                    mask=(rn[None, :] < N) & ((k0 + rk)[:, None] < K), other=0.0)
        # Round both operands to bf16 (8 significant bits), as a bf16 tensor-core GEMM would.
        xb = ((x.to(tl.int32, bitcast=True) + 0x8000) & -65536).to(tl.float32, bitcast=True)
        wb = ((w.to(tl.int32, bitcast=True) + 0x8000) & -65536).to(tl.float32, bitcast=True)
        acc += tl.dot(xb, wb)
    bias = tl.load(b_ptr + rn, mask=rn < N, other=0.0)
    z = (acc + bias[None, :]) * inv_div
    y = 0.5 * z * (1.0 + tl.math.erf(z * 0.7071067811865476))
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], y, mask=(rm[:, None] < M) & (rn[None, :] < N))


class Model(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.linear.weight.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=torch.float32)
        BM, BN, BK = 32, 64, 32
        grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
        linear_div_gelu_kernel[grid](x, self.linear.weight.contiguous(), self.linear.bias, y, M, N, K,
                                     1.0 / self.divisor, BM=BM, BN=BN, BK=BK)
        return y
