"""The zygotes a long-lived supervisor keeps warm between evaluations, one per device.

A batch worker or the service evaluates many solutions in one process. Each solution still gets
a fresh, sandboxed process forked from a zygote, and whatever a solution leaves behind is killed
after its evaluation; what is saved is the zygote's own start (a Python process importing torch
and Triton, about 5 s). Outside such processes the pool is off and every evaluation starts and
closes a zygote of its own, except `kbv3 eval`, which starts its one zygote first thing (beside
the MPS daemon's start and its own import of torch) and closes it before it prints the record.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ...solution.zygote import Zygote
from ...solution.zygote_server import SERVER_MODULE, ServedZygote, wanted


class ZygotePool:
    def __init__(self) -> None:
        self.enabled = False
        self.kept = False  # on for the process's life (keep_zygotes_warm), not until close_warm_zygotes
        self._zygotes: dict[str, Zygote] = {}

    def get(self, device: str, served: bool = False, server_module: str = SERVER_MODULE) -> Zygote | None:
        """The live warm zygote for `device` (started now if there is none, by the warm server
        if `served`: the program `server_module`, launched if none listens), or None when off."""
        if not self.enabled:
            return None
        zygote = self._zygotes.get(device)
        if zygote is None or zygote.exited():
            log = Path(tempfile.mkstemp(prefix=f"kbv3-zygote-{device}-", suffix=".log")[1])
            if served:
                zygote = ServedZygote(device, log, server_module=server_module)
            else:
                zygote = Zygote(device, log)
            self._zygotes[device] = zygote
        return zygote

    def holds(self, zygote: Zygote) -> bool:
        return any(z is zygote for z in self._zygotes.values())

    def drop(self, device: str) -> None:
        """Forget `device`'s zygote (one that could not reap is not reused)."""
        self._zygotes.pop(device, None)

    def close(self) -> None:
        """Close every warm zygote now (they would die with this process anyway; a CLI that
        started one ahead of its evaluation closes it in a named step, not at the exit)."""
        zygotes, self._zygotes = list(self._zygotes.values()), {}
        for zygote in zygotes:
            zygote.close()
            Path(zygote.log_path).unlink(missing_ok=True)  # as an evaluation's own zygote's log goes with its folder


POOL = ZygotePool()


def keep_zygotes_warm() -> None:
    """Reuse one zygote per device for every later evaluation in this process."""
    POOL.enabled = POOL.kept = True


def start_warm_zygote(device: str, served: bool = False, server_module: str = SERVER_MODULE) -> Zygote:
    """Start `device`'s warm zygote now rather than in the first evaluation; its torch import
    then runs beside whatever this process does next. The evaluations use it until
    `close_warm_zygotes` (for the process's life after `keep_zygotes_warm`). `served`: forked by
    the warm server that outlives this process (`solution.zygote_server`; launched, if none
    listens, as the program `server_module`), where it is wanted."""
    POOL.enabled = True
    zygote = POOL.get(device, served and wanted(), server_module)
    assert zygote is not None  # the pool is on
    return zygote


def close_warm_zygotes() -> None:
    """Close the warm zygotes this process holds; unless `keep_zygotes_warm` kept the pool on,
    later evaluations start and close a zygote of their own again (a CLI verb run in-process
    leaves its caller's evaluations as they were)."""
    POOL.close()
    POOL.enabled = POOL.kept
