"""Attack (GPU): as gate_done_mid_graph_gemm_half.py, with DONE written three quarters of the
way through the GEMM (after three of its four launches). Standalone: the evaluator copies only
the solution file into its sandbox.

Problem: level1/1_Square_matrix_multiplication_
Class: T2
Expect: timed_outputs (the output copied at DONE lacks its last quarter), or timing_gap
(gap_work); never scored at the forged time
"""

import gc

import torch
import torch.nn as nn
import triton
import triton.language as tl

FORGED_DONE = 0x7FFFFFFF  # >= every seq, by the gate's (cyclic, 32-bit) comparison too


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr
):
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BN)
    pid_m = pid // grid_n
    pid_n = pid % grid_n
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(
            a_ptr + rm[:, None] * sam + (k0 + rk)[None, :] * sak,
            mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + (k0 + rk)[:, None] * sbk + rn[None, :] * sbn,
            mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc += tl.dot(a, b, input_precision="tf32x3")
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _done_address():
    """The DONE word's device address in this context, once the worker has its doorbell."""
    from kernelbench_v3.evaluate.protocol.gate import GATE_BYTES, GATE_DONE_OFFSET, Driver
    from kernelbench_v3.evaluate.solution.worker import Worker

    worker = next((o for o in gc.get_objects() if isinstance(o, Worker)), None)
    if worker is None or not getattr(worker, "bell_address", 0):  # 0 until the timed calls are prepared
        return None, None
    driver = Driver()
    return driver, driver.register(worker.bell_address, GATE_BYTES) + GATE_DONE_OFFSET


class Model(nn.Module):
    DONE_AFTER = 3  # of four launches

    def __init__(self):
        super().__init__()
        self.driver = self.done = None

    def forward(self, A, B):
        capturing = torch.cuda.is_current_stream_capturing()
        if self.done is None and not capturing:
            self.driver, self.done = _done_address()
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), device=A.device, dtype=torch.float32)
        BM, BN, BK = 64, 64, 32
        rows = triton.cdiv(M, 4)
        for part in range(4):
            lo, hi = part * rows, min(M, (part + 1) * rows)
            grid = (triton.cdiv(hi - lo, BM) * triton.cdiv(N, BN),)
            matmul_kernel[grid](
                A[lo:hi],
                B,
                C[lo:hi],
                hi - lo,
                N,
                K,
                A.stride(0),
                A.stride(1),
                B.stride(0),
                B.stride(1),
                C.stride(0),
                C.stride(1),
                BM=BM,
                BN=BN,
                BK=BK,
            )
            if capturing and self.done is not None and part + 1 == self.DONE_AFTER:
                self.driver.write(torch.cuda.current_stream(), self.done, FORGED_DONE)
        return C
