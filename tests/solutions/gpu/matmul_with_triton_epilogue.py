"""Attack (T1, library GEMM): cuBLAS does the GEMM through torch.matmul; a Triton kernel only
applies the bias, the division and the GELU. `library_ops` must reject it (and `main_work` on
CUDA, where the GEMM dominates the device time)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def epilogue_kernel(z_ptr, b_ptr, y_ptr, n_cols, total, inv_div, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    z = tl.load(z_ptr + offs, mask=mask, other=0.0) + tl.load(b_ptr + offs % n_cols, mask=mask, other=0.0)
    z = z * inv_div
    tl.store(y_ptr + offs, 0.5 * z * (1.0 + tl.math.erf(z * 0.7071067811865476)), mask=mask)


class Model(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x):
        z = torch.matmul(x, self.linear.weight.t()).contiguous()
        y = torch.empty_like(z)
        total = z.numel()
        epilogue_kernel[(triton.cdiv(total, 1024),)](z, self.linear.bias, y, z.shape[1], total,
                                                     1.0 / self.divisor, BLOCK=1024)
        return y
