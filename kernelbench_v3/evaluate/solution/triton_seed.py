"""Triton's CUDA driver helper, compiled once by a trusted process and copied into each solution
process's own Triton cache.

Triton builds a small C module (`cuda_utils`, from its `driver.c`) with the system's C compiler
the first time a process launches a kernel, and keeps it in `TRITON_CACHE_DIR`. Every solution
process has a fresh cache of its own in its scratch folder (a cache it could write and a later
solution read would let one solution's files decide another's run), so every solution process
paid that compile. Its source is Triton's own, not the solution's, so a trusted process can build
it ahead: once per machine and Triton version it is built (`ensure_seed`, by Triton's own code
in a child process) into a folder under the cache root, which the sandbox leaves read-only to
solutions, and each forked CUDA solution process copies it into its scratch cache while it is
still trusted, before it is confined (`seed_into`, from `zygote._child`; the first such process
on a machine builds it). A copy, never a link: what a solution writes into its cache stays its
own. Anything that goes wrong leaves Triton to build the helper in the process, as before.

(What Triton memoizes in memory at a first compile is `evaluate.compile_memos`.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ...paths import cache_root

BUILD_TIMEOUT_S = 30.0  # a gcc of one small file; within the start limit (START_LIMIT_S)
FAILED_NAME = "failed.txt"  # beside the seeds: why the last build failed (delete it to try again)
# Run in a child process with TRITON_CACHE_DIR set: Triton's own code builds and loads the helper.
BUILD_CODE = "from triton.backends.nvidia.driver import CudaUtils; CudaUtils()"


def seed_folder(root: Path | None = None) -> Path | None:
    """Where this Python's Triton keeps its seed (None where Triton is not importable)."""
    try:
        import triton
    except Exception:  # noqa: BLE001 - no Triton, nothing to seed
        return None
    tag = f"triton-{triton.__version__}-py{sys.version_info.major}{sys.version_info.minor}"
    return (root or cache_root()) / "triton-seed" / tag


def ensure_seed(folder: Path | None, build_code: str = BUILD_CODE, timeout_s: float = BUILD_TIMEOUT_S) -> Path | None:
    """The seed `folder`, built first if it is not there; None if it cannot be (the reason is
    kept in `failed.txt` beside it, so no later process tries again).

    The build is trusted and unconfined, so nothing a solution may have written reaches it: an
    isolated interpreter (`-I`: no PYTHONPATH, no user site, no current folder on sys.path), run
    in the new, empty folder, with its home and temporary files beside the seeds."""
    if folder is None:
        return None
    if folder.is_dir():
        return folder
    failed = folder.parent / FAILED_NAME
    if failed.exists():
        return None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    except OSError:
        return None  # a read-only cache root: Triton builds in each process, as before
    try:
        trusted = str(folder.parent)
        done = subprocess.run(
            [sys.executable, "-I", "-c", build_code],
            env={
                **os.environ,
                "TRITON_CACHE_DIR": str(building),
                "TRITON_INTERPRET": "0",
                "HOME": trusted,
                "TMPDIR": trusted,
            },
            cwd=building,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout_s,
        )
        if done.returncode != 0 or not any(building.iterdir()):
            reason = done.stderr.decode(errors="replace")[-2000:] or f"exit code {done.returncode}, nothing built"
            _note_failure(failed, build_code, reason)
            return None
        try:
            os.rename(building, folder)  # all or nothing; a process that built it first wins
        except OSError:
            pass
        return folder if folder.is_dir() else None
    except (OSError, subprocess.SubprocessError) as exc:
        _note_failure(failed, build_code, f"{type(exc).__name__}: {exc}")
        return None
    finally:
        shutil.rmtree(building, ignore_errors=True)


def _note_failure(failed: Path, build_code: str, reason: str) -> None:
    """Why the build failed, beside the seeds (best effort: an unwritable root keeps no note)."""
    try:
        failed.write_text(f"{build_code}\n{reason}\n")
    except OSError:
        pass


def copy_seed(seed: Path | None, triton_cache: Path) -> bool:
    """Copy the seed's entries into a solution process's own Triton cache (before it is confined).
    False when there is no seed or the copy failed: Triton then builds the helper itself."""
    if seed is None:
        return False
    try:
        shutil.copytree(seed, triton_cache, symlinks=False, dirs_exist_ok=True)
    except OSError:
        return False
    return True


def seed_into(folder: Path | None, triton_cache: Path) -> bool:
    """Build the seed if need be, then copy it into `triton_cache`; whether a seed was copied.
    Never raises: it runs in a solution process before the solution is imported, and a seed it
    cannot have must cost nothing but Triton's own build."""
    try:
        return copy_seed(ensure_seed(folder), triton_cache)
    except Exception:  # noqa: BLE001 - an unreadable cache root, say
        return False
