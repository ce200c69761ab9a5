"""kernelbench-v3: the KernelBench-v3 problems as a Hub dataset, and a local evaluator."""

__version__ = "0.1.0"


def load_problems(split: str, source=None, **load_kwargs):
    """One GPU split of the problems dataset (a built folder, or a Hub repo id; default: the
    published repo) as a `datasets.Dataset`. See `kernelbench_v3.hub.load_problems`; imported
    here lazily so `import kernelbench_v3` stays free of torch and datasets."""
    from .hub import load_problems as _load_problems

    return _load_problems(split, source, **load_kwargs)
