"""kernelbench-v3: the KernelBench-v3 problems as a Hub dataset, and a local evaluator."""

__version__ = "0.1.0"


def load_problems(split: str, source=None, **load_kwargs):
    """One GPU split of the problems dataset (a built folder, or a Hub repo id; default: the
    published repo) as a `datasets.Dataset`. See `kernelbench_v3.dataset.hub.load_problems`; imported
    here lazily so `import kernelbench_v3` stays free of torch and datasets."""
    from .dataset.hub import load_problems as _load_problems

    return _load_problems(split, source, **load_kwargs)


def load_runs(source=None, **kwargs):
    """The runs dataset (published `results.csv`, a folder, or evaluator records), validated and
    normalized. See `kernelbench_v3.runs.load.load_runs`; imported lazily (pandas)."""
    from .runs.load import load_runs as _load_runs

    return _load_runs(source, **kwargs)


def join_runs(runs, problems=None, **kwargs):
    """Runs beside their problems' columns (default: the bundled catalog); unmatched rows are
    kept and reported. See `kernelbench_v3.runs.load.join_runs`."""
    from .catalog.problem import discover
    from .runs.load import join_runs as _join_runs

    return _join_runs(runs, discover() if problems is None else problems, **kwargs)
