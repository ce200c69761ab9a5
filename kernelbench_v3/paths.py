"""Where kernelbench-v3 keeps data on disk between runs: one cache root for every cache."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """`$KBV3_CACHE_DIR`, else `~/.cache/kbv3` (baselines, problem facts)."""
    return Path(os.environ.get("KBV3_CACHE_DIR") or Path.home() / ".cache" / "kbv3")
