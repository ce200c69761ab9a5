"""Attack (GPU): the fastest release a solution can build, the gate inside its own kernel. Its
process arms every gated call as one Triton launch of its own in place of the gate's wait (or
spin), the captured graph and the stream's write of DONE: every program of that kernel reads
GO from the doorbell's host word until it opens, computes its row of the softmax, and the last
program to finish writes DONE itself, behind a system-wide fence. No stream wait, no launch of
a graph after GO and no stream write sit in its window, so it is shorter than any honest call's
by that fixed cost (docs/threat-model.md).

The echo under MPS is the fused echo (`protocol.gate.ECHO_PTX`: GO read and DONE written by one
resident kernel, no work), the fastest window there is, so the net time of this attack is no
less than its softmax's own time on the GPU.

Problem: level1/23_Softmax
Class: T2
Expect: correct, scored no less than its own single-call GPU time (about the honest softmax's,
within the fidelity bound), or a timing flag; never scored a launch's fixed cost under it
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    _softmax_row(x_ptr, y_ptr, row, n_cols, stride, BLOCK)


@triton.jit
def _softmax_row(x_ptr, y_ptr, row, n_cols, stride, BLOCK: tl.constexpr):
    x_row = x_ptr + row * stride
    y_row = y_ptr + row * stride
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -1.0e30, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + offs, mask=start + offs < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    row_max = tl.max(m, 0)
    row_sum = tl.sum(s * tl.exp(m - row_max), 0)
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        x = tl.load(x_row + start + offs, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(y_row + start + offs, tl.exp(x - row_max) / row_sum, mask=mask)


@triton.jit(do_not_specialize=["seq"])  # one compile, whatever the call's number
def gated_softmax_kernel(x_ptr, y_ptr, n_cols, stride, go_ptr, done_ptr, count_ptr, seq, rows, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    go = tl.load(go_ptr, volatile=True)
    while go - seq < 0:  # GO >= seq, wrap-aware, as the gate's own wait reads it
        go = tl.load(go_ptr, volatile=True)
    _softmax_row(x_ptr, y_ptr, row, n_cols, stride, BLOCK)
    finished = tl.atomic_add(count_ptr, 1, sem="acq_rel", scope="gpu")
    if finished == rows - 1:  # every row is stored: the last program closes the call
        tl.atomic_xchg(count_ptr, 0, sem="relaxed", scope="gpu")
        tl.inline_asm_elementwise(
            "fence.sc.sys; st.volatile.global.u32 [$1], $2; mov.u32 $0, 0;",
            "=r,l,r",
            [done_ptr.to(tl.int64, bitcast=True), seq],
            dtype=tl.int32,
            is_pure=False,
            pack=1,
        )


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        block = min(triton.next_power_of_2(cols), 4096)
        softmax_kernel[(rows,)](x, y, cols, x.stride(0), BLOCK=block)
        return y


class _HostWord:
    """A host word mapped for the device, as a pointer Triton takes."""

    dtype = torch.int32

    def __init__(self, address):
        self.address = address

    def data_ptr(self):
        return self.address


def _gate_inside_the_kernel() -> None:
    from kernelbench_v3.evaluate.protocol import gate
    from kernelbench_v3.evaluate.solution import worker

    honest_capture = worker.Worker.capture
    calls_of = {}  # a graph's replay -> (the set's input, where the graph's output lies)
    counter = []

    def launch(x, y, go, done, seq):
        rows, cols = x.shape
        block = min(triton.next_power_of_2(cols), 4096)
        gated_softmax_kernel[(rows,)](x, y, cols, x.stride(0), go, done, counter[0], seq, rows, BLOCK=block)

    def capture(self, msg):
        reply = honest_capture(self, msg)
        for s, graph in enumerate(self.calls.graphs):
            calls_of[id(graph)] = (self.calls.sets[s][0], self.calls.outputs[s])
        if self.calls.graphs:
            # Compiled and loaded now, on words of its own already open, not in the first
            # arming: on the H200 that arming did not answer within 46 s (cause not found).
            x, y = calls_of[id(self.calls.graphs[0])]
            counter.append(torch.zeros(1, dtype=torch.int32, device=x.device))
            words = torch.tensor([1 << 30, 0], dtype=torch.int32, device=x.device)
            launch(x, y, words[0:1], words[1:2], 1)
            torch.cuda.synchronize()
        return reply

    def enqueue(words, driver, stream, seq, work, spin=False):
        x, y = calls_of[id(work.__self__)]
        with torch.cuda.stream(stream):
            launch(x, y, _HostWord(words.go_device), _HostWord(words.done_device), seq)

    worker.Worker.capture = capture
    worker.HANDLERS["capture"] = capture
    gate.GateWords.enqueue = enqueue


_gate_inside_the_kernel()
