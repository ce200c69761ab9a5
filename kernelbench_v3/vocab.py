"""The words every wing shares, defined once: GPU splits and the runs dataset's GPU names, the
evaluator's option values, record statuses, precisions, and the column lists of records and runs.

A leaf: it imports nothing from the package and nothing heavy, so any wing (and the command
line's `choices=`) can use it. Each closed set is a `Literal` type, plus the tuple of its values where code lists or checks them.
"""

from __future__ import annotations

from typing import Literal, get_args

# --- GPU splits -----------------------------------------------------------------------------
Split = Literal["rtx3090", "h100", "b200"]
SPLITS: tuple[Split, ...] = get_args(Split)
# The runs dataset spells each split's GPU in capitals ("H100"); records use that spelling.
RUNS_GPU_OF_SPLIT: dict[Split, str] = {"rtx3090": "RTX3090", "h100": "H100", "b200": "B200"}
SPLIT_OF_RUNS_GPU: dict[str, Split] = {gpu: split for split, gpu in RUNS_GPU_OF_SPLIT.items()}


def runs_gpu_name(gpu: str) -> str:
    """The runs dataset's spelling of a split or GPU name: `h100` -> `H100`, `RTX 3090` ->
    `RTX3090`, `h200` -> `H200` (a GPU outside the splits keeps its name, in capitals)."""
    key = "".join(c for c in str(gpu) if c.isalnum()).upper()
    if not key:
        raise ValueError(f"empty GPU name {gpu!r}")
    return key


def split_of(gpu: str) -> Split | None:
    """The split a split or runs-dataset GPU name evaluates (`H100` -> `h100`), or None."""
    return SPLIT_OF_RUNS_GPU.get(runs_gpu_name(gpu)) if str(gpu).strip() else None


# --- what the evaluator can be asked ----------------------------------------------------------
Device = Literal["cuda", "cpu"]
DEVICES: tuple[Device, ...] = get_args(Device)
# "v3": allclose at 1e-2 (comparable with the runs dataset); "published": the published harness's
# per-precision max-error rule; "strict": calibrated from the reference's own float64 error.
ToleranceMode = Literal["v3", "published", "strict"]
TOLERANCE_MODES: tuple[ToleranceMode, ...] = get_args(ToleranceMode)
# "strict": own kernels ran, no library GEMM/conv/attention, own kernels do the main work;
# "v3": the published rule (an own kernel ran). "relaxed" is what a request that does not
# require a custom kernel gets: the rule is reported, never enforced.
KernelRule = Literal["strict", "v3", "relaxed"]
REQUESTABLE_KERNEL_RULES: tuple[KernelRule, ...] = ("strict", "v3")
SizeMode = Literal["default", "reduced"]
SIZE_MODES: tuple[SizeMode, ...] = get_args(SizeMode)
Executor = Literal["local", "ray"]
EXECUTORS: tuple[Executor, ...] = get_args(Executor)

# --- what a record says -----------------------------------------------------------------------
# "failed": the solution did not run; "incomplete": a planned case never came back;
# "error": the evaluator itself could not judge (bad problem, no reference, a crash of ours).
Status = Literal["correct", "incorrect", "failed", "incomplete", "error"]
STATUSES: tuple[Status, ...] = get_args(Status)
CheckOutcome = Literal["pass", "fail", "skip", "not run"]
BaselineType = Literal["eager", "compile"]
TimingMethod = Literal[
    "supervisor_gated_cuda_graphs",
    "supervisor_calls_cuda_eager",
    "supervisor_calls_cpu",
    # Older records: the rung graph calls (TIMING_VERSION 6), the k-call windows before them
    # and the events before those.
    "supervisor_calls_cuda_graphs",
    "supervisor_windows_cuda_graphs",
    "supervisor_windows_eager",
    "supervisor_windows_cpu",
    "cuda_events",
    "cpu_wall_clock",
    "",
]
# The methods whose times are GPU performance figures (a CPU time tests the machinery only).
GPU_TIMING_METHODS = (
    "supervisor_gated_cuda_graphs",
    "supervisor_calls_cuda_graphs",
    "supervisor_calls_cuda_eager",
    "supervisor_windows_cuda_graphs",
    "supervisor_windows_eager",
    "cuda_events",
)
# The precision keys of the GPUs' peak tables (fp32 is plain FP32, tf32 the tensor-core mode).
Precision = Literal["fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4"]
PRECISIONS: tuple[Precision, ...] = get_args(Precision)
# What a problem file may declare in SUPPORTED_PRECISIONS (int4 storage has no peak of its own).
PROBLEM_PRECISIONS: frozenset[str] = frozenset(PRECISIONS) | {"int4"}

# --- columns ----------------------------------------------------------------------------------
# The columns of the published runs table (`Infatoshi/kernelbench-v3-runs` results.csv), in order.
PUBLISHED_RUNS_COLUMNS: tuple[str, ...] = (
    "model",
    "gpu",
    "level",
    "problem",
    "compiled",
    "correct",
    "speedup",
    "ref_ms",
    "sol_ms",
    "turns",
    "total_tokens",
    "estimated_cost_usd",
    "op_type",
    "baseline_type",
    "precision_used",
    "run_dir",
    "solution_link",
    "baseline_link",
)
# What the agent that wrote a solution spent and where it was published: not the evaluator's to know.
AGENT_RUNS_COLUMNS: tuple[str, ...] = (
    "turns",
    "total_tokens",
    "estimated_cost_usd",
    "run_dir",
    "solution_link",
    "baseline_link",
)
# The published columns an evaluator record fills itself, in the published order.
RECORD_RUNS_COLUMNS: tuple[str, ...] = tuple(c for c in PUBLISHED_RUNS_COLUMNS if c not in AGENT_RUNS_COLUMNS)


# --- counts in words ---------------------------------------------------------------------------
def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`1 sample`, `2 samples` (`nouns` where the plural is no `s` away: `retries`): a count a
    reader sees, in the number it has (every summary line)."""
    return f"{count} {noun}" if count == 1 else f"{count} {nouns or noun + 's'}"
