"""MPS for the timed calls: optional, private, never required.

Without MPS the GPU time-slices between the supervisor's context and the solution's, and a
gated window holds a context switch of about 150 us whose spread is as wide as a small kernel
(docs/timing.md). Under an MPS daemon the processes share one server context: the echo's window
falls to about 10 us and calls of 10-50 us are timed within a few percent.

`private_daemon()` starts a daemon of this user's own (pipe and log folders under a fresh
temporary folder, so no other user's daemon or setting is touched) when `KBV3_MPS=1` asks for
it, the control program exists and no daemon is in use already; it must run before this process
opens a CUDA context, since a context joins MPS only when it is created. Children (the zygote,
the solution and echo processes, the baseline child) inherit the folders through the
environment. The daemon is asked to quit when the block ends. `in_use()` says whether this
process's contexts go through one: the record keeps it (`timing_details.mps`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

ASK_ENV = "KBV3_MPS"  # "1": start a private daemon for the evaluations of this process
PIPE_ENV, LOG_ENV = "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"
CONTROL = "nvidia-cuda-mps-control"


def asked() -> bool:
    return os.environ.get(ASK_ENV, "").strip().lower() in ("1", "true", "yes")


def in_use() -> bool:
    """Whether a daemon's control pipe is where this process's CUDA contexts will look for it."""
    folder = os.environ.get(PIPE_ENV, "")
    return bool(folder) and (Path(folder) / "control").exists()


def _default_compute_mode() -> bool:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_mode", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    modes = {line.strip() for line in out.splitlines() if line.strip()}
    return modes == {"Default"}


@contextlib.contextmanager
def private_daemon(ask: bool | None = None) -> Iterator[bool]:
    """Run the block under a private MPS daemon when asked and possible; yields whether MPS is
    in use. Never raises for a missing or failing daemon: the evaluations then run without."""
    if not (asked() if ask is None else ask) or in_use() or shutil.which(CONTROL) is None:
        yield in_use()
        return
    if not _default_compute_mode():
        yield False
        return
    root = Path(tempfile.mkdtemp(prefix="kbv3-mps-"))
    env = {PIPE_ENV: str(root / "pipe"), LOG_ENV: str(root / "log")}
    for folder in env.values():
        Path(folder).mkdir(mode=0o700)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    started = subprocess.run([CONTROL, "-d"], capture_output=True, timeout=60).returncode == 0
    try:
        yield started and in_use()
    finally:
        if started:
            subprocess.run([CONTROL], input=b"quit\n", capture_output=True, timeout=60)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(root, ignore_errors=True)
