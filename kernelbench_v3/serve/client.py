"""The Python client of `kbv3 serve`: `Evaluator(socket).evaluate(problem_id, source) -> Record`.

Imports neither torch nor the evaluator's machinery (only `Record` and the catalog), so an RL
loop, a notebook or `kbv3 eval --server` pays none of their start-up. Each call opens its own
connection, so one Evaluator may be used from several threads. The client refuses a socket
whose server runs as another user.

    from kernelbench_v3.serve import Evaluator

    ev = Evaluator("/run/user/1000/kbv3/serve.sock")
    record = ev.evaluate("level1/23_Softmax", source_text, time_solution=False, seeds=(42, 123))
    ev.status()    # the workers: pid, busy, queued, served, restarts
    ev.shutdown()
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..evaluate import Record
from .protocol import Conn, Deadline, PeerGone, ProtocolError, default_socket_path, json_options, peer_uid


class ServiceError(RuntimeError):
    """The service did not answer as it should (it went away mid-request, a protocol error)."""


class ServiceUnavailable(ServiceError):
    """No service listens on the socket."""


class ServiceTimeout(ServiceError, TimeoutError):
    """No reply within the Evaluator's `timeout_s` (a request still queued is then dropped)."""


class RequestError(ServiceError, ValueError):
    """The service refused the request (unknown problem, bad option, missing file): no record."""


@dataclass(frozen=True)
class Reply:
    """A record and where it was evaluated: the worker, its place in that worker's order, the
    seconds it waited in the queue and ran."""

    record: Record
    worker: str
    sequence: int
    queued_s: float
    run_s: float


class Evaluator:
    """A client of one running `kbv3 serve`. `timeout_s`: how long to wait for any one reply
    (None: as long as the evaluation takes; the service has its own watchdog); past it,
    ServiceTimeout, and a request still in the queue is dropped (one already running finishes)."""

    def __init__(self, socket_path: str | os.PathLike | None = None, *, timeout_s: float | None = None):
        self.socket_path = Path(socket_path) if socket_path is not None else default_socket_path()
        self.timeout_s = timeout_s

    def evaluate(self, problem_id: str, source: str | os.PathLike, **keywords: Any) -> Record:
        """Evaluate `source` on `problem_id` and return its Record (a crashed solution or worker
        is a failed Record, never an exception). `source` is the solution's text, or a path (a
        Path, or a one-line string naming an existing file). `keywords` are `submit`'s (declared
        there once): `gpu_index`, the GPU whose queue takes it (default: the least loaded);
        `problems_dir`, `cache_dir`; and the options: EvalOptions' fields (`time_solution=False`,
        `seeds=(42,)`, ...) and `gpu` (the split reported for), `sizes`, `model`, `device` (must be
        the service's). RequestError when the service refuses the request."""
        return self.submit(problem_id, source, **keywords).record

    def submit(
        self,
        problem_id: str,
        source: str | os.PathLike,
        *,
        gpu_index: int | None = None,
        problems_dir: str | os.PathLike | None = None,
        cache_dir: str | os.PathLike | None = None,
        **options: Any,
    ) -> Reply:
        """`evaluate`, with where and when the service ran it."""
        message: dict[str, Any] = {"kind": "evaluate", "problem_id": problem_id, "options": json_options(options)}
        path = _as_path(source)
        if path is not None:
            message["solution_path"] = str(path.resolve())
        else:
            message["source"] = str(source)
        if gpu_index is not None:
            message["gpu_index"] = gpu_index
        if problems_dir is not None:
            message["problems_dir"] = str(Path(problems_dir).resolve())
        if cache_dir is not None:
            message["cache_dir"] = str(Path(cache_dir).resolve())
        reply = self._ask(message, "record")
        return Reply(
            Record.from_dict(reply["record"]),
            str(reply.get("worker", "")),
            int(reply.get("sequence", 0)),
            float(reply.get("queued_s", 0.0)),
            float(reply.get("run_s", 0.0)),
        )

    def status(self) -> dict[str, Any]:
        """The service's pid, device, socket and workers (pid, ready, busy, queued, served, restarts)."""
        reply = self._ask({"kind": "status"}, "status")
        reply.pop("kind", None)
        return reply

    def shutdown(self) -> None:
        """Stop the service: queued and running requests get error records, the socket is removed."""
        self._ask({"kind": "shutdown"}, "bye")

    def _ask(self, message: Mapping[str, Any], expect: str) -> dict[str, Any]:
        conn = self._connect()
        try:
            conn.send(message)
            reply = conn.receive(self.timeout_s)
        except Deadline:
            raise ServiceTimeout(f"no reply from the service at {self.socket_path} within {self.timeout_s} s") from None
        except PeerGone as exc:
            raise ServiceError(f"the service at {self.socket_path} closed the connection: {exc}") from None
        except ProtocolError as exc:
            raise ServiceError(f"the service at {self.socket_path} broke the protocol: {exc}") from None
        finally:
            conn.close()
        if reply["kind"] == "error":
            raise RequestError(str(reply.get("error")))
        if reply["kind"] != expect:
            raise ServiceError(f"the service answered {reply['kind']!r} instead of {expect!r}")
        return reply

    def _connect(self) -> Conn:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(self.socket_path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            sock.close()
            raise ServiceUnavailable(
                f"no kbv3 serve is listening on {self.socket_path} ({exc.strerror or exc}); "
                f"start one with `kbv3 serve --socket {self.socket_path}`"
            ) from None
        except OSError as exc:
            sock.close()
            raise ServiceUnavailable(f"cannot connect to {self.socket_path}: {exc}") from None
        uid = peer_uid(sock)
        if uid is not None and uid != os.getuid():
            sock.close()
            raise ServiceError(f"the service at {self.socket_path} runs as another user (uid {uid}); refused")
        return Conn(sock)


def _as_path(source: str | os.PathLike) -> Path | None:
    """The solution's path when `source` names a file, None when it is source text."""
    if isinstance(source, os.PathLike):
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"solution file {path} does not exist")
        return path
    if "\n" in source or len(source) > 4096:
        return None
    try:
        path = Path(source).expanduser()
        return path if path.is_file() else None
    except (OSError, ValueError):
        return None
