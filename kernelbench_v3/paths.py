"""Where kernelbench-v3 keeps data on disk between runs: one cache root for every cache."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """`$KBV3_CACHE_DIR`, else `~/.cache/kbv3` (baselines, problem facts)."""
    return Path(os.environ.get("KBV3_CACHE_DIR") or Path.home() / ".cache" / "kbv3")


def write_atomically(path: Path, data: bytes | str) -> None:
    """Replace `path` with `data` so that a reader sees the old file or the new one, never a torn
    one. The temporary name is unique per call: threads of one process that write the same file
    at once (two evaluations of one problem) must not rename each other's temporary away."""
    import tempfile

    payload = data.encode("utf-8") if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
