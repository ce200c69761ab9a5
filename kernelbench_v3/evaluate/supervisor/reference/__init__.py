"""The reference room: everything computed from the problem's own code, never the solution's.

The reference run (`reference_run`: `compute` and `ReferenceRun`: inputs, expected outputs,
float64 residuals, ops, matmul FLOPs; `placement`: where its large tensors live), its costly
by-products on disk (`cache`, never an expected output) and in a long-lived worker's memory
(`warm`), and the baseline (`baseline`: eager and `torch.compile(mode="reduce-overhead")`, timed
by `timing.time_reference` in a reference-only child, `child` run by `isolate`, cached on disk;
`request_baseline` for one evaluation, `fill_baselines` for `kbv3 baselines`; `ahead`: a cold
baseline's child started before the reference phase, timing only after it). The reference is
vetted by the verdict's own rules (finiteness, the library-op rule), so it imports the verdict,
never the other way round.
"""

from .ahead import BaselineAhead
from .baseline import request_baseline, request_job
from .cache import for_evaluation, key_fields
from .fill import BaselineResult, fill_baselines
from .placement import HostCopies, release_cached
from .reference_run import ReferenceRun, Widened, build_on_host, compute, expected_on_device
from .warm import keep_references_warm
from .warm import key_of as warm_key
from .warm import recall as recall_warm
from .warm import remember as remember_warm

__all__ = [
    "BaselineAhead",
    "BaselineResult",
    "HostCopies",
    "ReferenceRun",
    "Widened",
    "build_on_host",
    "compute",
    "expected_on_device",
    "fill_baselines",
    "for_evaluation",
    "keep_references_warm",
    "key_fields",
    "recall_warm",
    "release_cached",
    "remember_warm",
    "request_baseline",
    "request_job",
    "warm_key",
]
