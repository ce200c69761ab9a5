"""Where kernelbench-v3 keeps data on disk between runs (one cache root for every cache), and the
one way it replaces a file (`write_atomically`)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """`$KBV3_CACHE_DIR`, else `~/.cache/kbv3` (baselines, problem facts)."""
    return Path(os.environ.get("KBV3_CACHE_DIR") or Path.home() / ".cache" / "kbv3")


def write_atomically(path: Path | str, data: bytes | str) -> None:
    """Replace `path` with `data` so that a reader sees the old file or the new one, never a torn
    one. The project's one atomic writer (caches, prompt files, batch Parquet).

    The temporary name is unique per call (`mkstemp`, not the pid): threads of one process that
    write the same file at once (two evaluations of one problem) must not rename each other's
    temporary away. It is removed on any failure, and a failure names `path`, never the
    temporary, which the user never asked for."""
    import tempfile

    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
