"""Where a split of the problems dataset is loaded from: a folder `kbv3 build` wrote, or a Hub
dataset repo, and the mistakes on the way named at once.

`load_problems` decides what `source` is before anything slow runs. A path-like source (a
`Path`, one starting with `.`, `/` or `~`, one with more than one `/` or a `\\`, one whose
first part is a local folder, or anything that is no `namespace/name` repo id) is a folder:
missing, it fails naming the path, never taken for a repo id and retried on the Hub. A repo id
goes to the Hub only when the Hub can be used (`hub_reach`): offline, with `HF_HUB_OFFLINE` or
`HF_DATASETS_OFFLINE` set, the local `datasets` cache is tried and a miss says so in one
error; with no switch set and no connection, it fails within the probe's seconds, not after the
client's retries. The split takes any spelling (`h100`, `H100`, `RTX 3090`), as `--split` does.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..hub_reach import hub_unreachable, offline_variable
from ..vocab import SPLITS, split_of

DEFAULT_REPO_ID = "Infatoshi/kernelbench-v3-problems"
CARD_FILE = "README.md"
# A Hub repo id: `namespace/name`, letters, digits, `-`, `_` and `.` (huggingface_hub's rule).
REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")


class HubUnavailableError(ConnectionError):
    """The Hub was asked for a repo id and cannot answer: offline, or not reachable."""


def is_local_source(source: str | Path) -> bool:
    """Whether `source` names a folder rather than a Hub repo id (see the module docstring)."""
    if isinstance(source, Path):
        return True
    text = str(source)
    if text.startswith((".", "/", "~")) or "\\" in text or text.endswith("/"):
        return True
    if Path(text).exists() or not REPO_ID.fullmatch(text):
        return True
    return Path(text.split("/", 1)[0]).is_dir()  # `out/nohub` beside an `out/` folder is a path


def _split_name(split: str) -> str:
    name = split_of(split) if isinstance(split, str) and split.strip() else None
    if name is None:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)} (any spelling: H100, RTX 3090)")
    return name


def _local_folder(source: str | Path) -> str:
    folder = Path(source).expanduser()
    if not folder.exists():
        raise FileNotFoundError(
            f"dataset folder {folder} does not exist; build one with `kbv3 build {folder}`, "
            f"or pass a Hub repo id such as {DEFAULT_REPO_ID}"
        )
    if not (folder / CARD_FILE).is_file():
        raise FileNotFoundError(
            f"{folder} is not a built dataset folder (no {CARD_FILE}); build one with `kbv3 build {folder}`"
        )
    return str(folder)


def _way_out(repo_id: str) -> str:
    return (
        f"build the dataset locally and load the folder: `kbv3 build out/hub`, then "
        f"load_problems(split, source='out/hub') (a folder named {repo_id!r} does not exist here either)"
    )


def load_problems(split: str, source: str | Path | None = None, **load_kwargs: Any):
    """One split as a `datasets.Dataset`, from a built folder or a Hub dataset repo id.

    `source` defaults to the published repo (`DEFAULT_REPO_ID`). A local folder is read through
    its card's YAML `configs`, exactly as the Hub reads it, and needs no network (it works with
    `HF_HUB_OFFLINE=1`). Extra keyword arguments go to `datasets.load_dataset` (cache_dir, ...).
    Raises ValueError (an unknown split), FileNotFoundError (a folder that does not exist or
    was not built) or HubUnavailableError (a repo id the Hub cannot serve now), each at once.
    """
    split = _split_name(split)
    source = DEFAULT_REPO_ID if source is None else source
    if is_local_source(source):
        source = _local_folder(source)
        import datasets

        return datasets.load_dataset(source, split=split, **load_kwargs)
    repo_id = str(source)
    switch = offline_variable()
    if not switch:
        why = hub_unreachable()
        if why:
            raise HubUnavailableError(f"cannot load {repo_id} from the Hub: {why}; {_way_out(repo_id)}")
    import datasets

    try:
        return datasets.load_dataset(repo_id, split=split, **load_kwargs)
    except ConnectionError as exc:
        if not switch:
            raise
        # Offline: only the local datasets cache could answer, and it holds no copy.
        raise HubUnavailableError(
            f"cannot load {repo_id}: {switch} is set, so the Hub is not asked, and the local datasets cache "
            f"has no copy ({type(exc).__name__}); {_way_out(repo_id)}, or unset {switch} on a machine online"
        ) from None
