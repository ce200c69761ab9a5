"""The warm server's program as `kbv3` launches it: the zygote server (`evaluate.solution.
zygote_server`) that also runs whole `kbv3 eval` runs for the thin client in `served`.

`become_cli` is what the server's forked child does with a `cli` request: it takes the caller's
environment, folder, signal dispositions and stdin, stdout and stderr, dies with the caller, runs
`main.main` with the caller's arguments and a `Wall` that starts at the caller's start, and sends
back the exit status. Nothing imports this module; `python -m` runs it.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import sys
from typing import Any, NoReturn

from .. import evaluate
from .served import FORWARDED, NO_STATUS


def become_cli(conn: socket.socket, request: dict[str, Any], fds: list[int], import_s: float) -> NoReturn:
    """In the server's forked child: the caller's `kbv3 eval`, its status sent back. Never returns."""
    code = NO_STATUS
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for sig in FORWARDED:  # as the program would have them: the caller's ignored ones ignored
            default = signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL
            signal.signal(sig, signal.SIG_IGN if int(sig) in request.get("ignored", []) else default)
        os.setsid()
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        _take_stdio(fds)
        evaluate.die_with_process(int(request["pid"]))
        conn.send(json.dumps({"kind": "cli_started", "pid": os.getpid()}).encode())
        from ..evaluate import Wall
        from .main import main

        wall = Wall(started=float(request["started"]))
        wall.split(float(request["asked_at"]), "served_start")
        code = main(list(request["argv"]), wall=wall)
    except SystemExit as exc:  # argparse's usage errors and --version
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except KeyboardInterrupt:  # before `main` took over its handling
        code = 130
    except BaseException as exc:  # noqa: BLE001 - said on the caller's stderr, then the status
        print(f"kbv3 eval: {type(exc).__name__}: {exc}", file=sys.stderr)
    finally:
        evaluate.warm_server_leave(conn, {"exit": code}, code)


def _take_stdio(fds: list[int]) -> None:
    """The caller's stdin, stdout and stderr as this process's, buffered as Python buffers a
    program's own: stdout line by line on a terminal, stderr always."""
    if len(fds) != 3:
        raise ValueError(f"a request sent {len(fds)} file descriptors, not stdin, stdout and stderr")
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    encoding = os.environ.get("PYTHONIOENCODING", "").split(":")[0] or "utf-8"
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding=encoding)
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding=encoding, line_buffering=os.isatty(1)
    )
    sys.stderr = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
        encoding=encoding,
        errors="backslashreplace",
        line_buffering=True,
    )


if __name__ == "__main__":
    evaluate.warm_server_main("\0" + sys.argv[1], float(sys.argv[2]), handlers={"cli": become_cli})
