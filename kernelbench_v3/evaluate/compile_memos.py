"""What Triton and inductor memoize per process at a first compile, computed once by the warm
parents so that every fork inherits it.

A process's first Triton compile computes facts it then keeps for the process's life: the hash
of Triton's installation that keys every cache entry (`triton_key`: a SHA-256 of its 400-500 MB
`libtriton.so` and its sources, 0.3-1 s), the folder of libcuda (an `ldconfig` run) and ptxas's
version (a `ptxas` run); inductor keys its caches by a hash of torch's sources (`torch_key`,
about 0.3 s). None of them needs CUDA or anything of a solution's, so the CUDA-free warm parents
compute them before they fork: the zygote for solution processes (`warm_triton`) and the
baseline server for baseline children (`warm_triton`, `warm_inductor`). A fork gets a copy in its
own memory; nothing is ever read back from one. Each step is best effort: what cannot be
computed (another version, no ptxas) is named and left to the fork, as before.
"""

from __future__ import annotations

import os
from collections.abc import Callable


def warm_triton() -> list[str]:
    """Triton's memos (module docstring); what could not be computed, named. Never raises;
    nothing where Triton only interprets (the CPU: it compiles nothing)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return []
    return _each((("triton_key", _triton_key), ("libcuda_dirs", _libcuda_dirs), ("ptxas", _ptxas)))


def warm_inductor() -> list[str]:
    """Inductor's hash of torch's sources; what could not be computed, named. Never raises."""
    return _each((("torch_key", _torch_key),))


def _each(steps: tuple[tuple[str, Callable[[], None]], ...]) -> list[str]:
    missed = []
    for name, compute in steps:
        try:
            compute()
        except Exception as exc:  # noqa: BLE001 - another version, no ldconfig, no ptxas
            missed.append(f"{name}: {type(exc).__name__}: {exc}"[:200])
    return missed


def _triton_key() -> None:
    from triton.runtime.cache import triton_key

    triton_key()


def _libcuda_dirs() -> None:
    from triton.backends.nvidia.driver import libcuda_dirs

    libcuda_dirs()


def _ptxas() -> None:
    from triton import knobs

    if knobs.nvidia.ptxas is None:  # Triton runs `ptxas --version` to find it
        raise FileNotFoundError("no ptxas")


def _torch_key() -> None:
    from torch._inductor.codecache import torch_key

    torch_key()
