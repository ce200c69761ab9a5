"""The hardware/software fingerprint of an evaluation (what produced this number).

`software()` is cheap and safe in any process; `device_info(device)` initializes CUDA, so it runs
in the supervisor when the evaluation runs on CUDA. The driver version comes from `nvidia-smi` when
that tool exists.
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess
from typing import Any


def software() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "platform": platform.platform(),
    }
    try:
        import triton

        info["triton"] = triton.__version__
    except Exception:
        info["triton"] = None
    try:
        info["cudnn"] = torch.backends.cudnn.version()
    except Exception:
        info["cudnn"] = None
    return info


def _nvidia_smi(query: str) -> str | None:
    """The first GPU's `query` from nvidia-smi, asked once per process and GPU pinning: a GPU's
    name and driver do not change under a running process, and each call of the tool costs a
    few hundred milliseconds on a large host (an evaluation asked it three times)."""
    return _nvidia_smi_once(query, os.environ.get("CUDA_VISIBLE_DEVICES"))


@functools.lru_cache(maxsize=32)
def _nvidia_smi_once(query: str, visible: str | None) -> str | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run(
            [exe, f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.SubprocessError):
        return None
    line = out.stdout.strip().splitlines()
    return line[0].strip() if out.returncode == 0 and line else None


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_info(device: str) -> dict[str, Any]:
    """The device the evaluation ran on (initializes CUDA when `device` is "cuda")."""
    import torch

    info: dict[str, Any] = {"device": device, "cpu": cpu_name()}
    if device == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        info.update(
            gpu_name=props.name,
            compute_capability=f"{props.major}.{props.minor}",
            sm_count=props.multi_processor_count,
            memory_gib=round(props.total_memory / 2**30, 1),
            l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0),
            driver=_nvidia_smi("driver_version"),
        )
    return info


def device_name(device: str) -> str:
    """A stable name for cache keys, without initializing CUDA in this process."""
    if device == "cuda":
        name = _nvidia_smi("name")
        if name:
            return name
        import torch

        if torch.cuda.is_available():  # pragma: no cover - only where nvidia-smi is missing
            return torch.cuda.get_device_name()
        return "cuda-unavailable"
    return f"cpu:{cpu_name()}"
