"""kernelbench-v3: the KernelBench-v3 problems as a Hub dataset, and a local evaluator."""

__version__ = "0.1.0"
