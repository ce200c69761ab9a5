"""What the service and its clients say to each other: length-prefixed JSON, never pickle.

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON, an object with a
string `kind` (`evaluate.protocol.frames`, which needs no torch, so a client need not import
it). Frames are bounded (`MAX_FRAME_BYTES`); JSON parsing runs no code.

Client to service:

    {"kind": "evaluate", "problem_id": "level1/23_Softmax", "source": "<text>" | "solution_path": "/abs/sol.py",
     "options": {EvalOptions fields, "gpu", "device", "sizes", "model"}, "gpu_index": 0 | null,
     "problems_dir": null | "/abs", "cache_dir": null | "/abs"}
    {"kind": "status"}
    {"kind": "shutdown"}

Service to client:

    {"kind": "record", "record": Record.to_dict(), "worker": "gpu0", "sequence": 3, "queued_s": .., "run_s": ..}
    {"kind": "error", "error": "<why the request was refused>"}     (a bad request: no record)
    {"kind": "status", "pid": .., "device": .., "workers": [{"name", "gpu_index", "pid", "busy", "queued", ...}]}
    {"kind": "bye"}                                                 (the service is shutting down)

The service and its worker processes use the same frames over a socket pair: `evaluate`
(the request's fields, the source or path) one way; `ready`, `started`, `record`, `error` back.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# The framing is the evaluator's (it needs no torch); a request (its source text) or a reply larger
# than MAX_FRAME_BYTES is refused.
from ..evaluate import MAX_FRAME_BYTES, Deadline, Link, PeerGone, ProtocolError  # noqa: F401 (the serve wing takes them from here)

MAX_SOCKET_PATH = 107  # bytes: sun_path holds 108 with its NUL
SOURCE_LABEL = "<source>"  # the record's solution_path when the client sent the text, not a path
# What a request's options may name: EvalOptions' fields plus where and for whom it runs.
PLACEMENT = ("gpu", "device", "sizes", "model")


class BadRequest(ValueError):
    """A request the service refuses before evaluating (unknown problem, wrong option, ...)."""


class Conn(Link):
    """The service's frames: those of the evaluator's channel, strict JSON (no NaN) for clients in
    any language."""

    allow_nan = False


def peer_uid(sock: socket.socket) -> int | None:
    """The user id of the process at the other end of a Unix socket (Linux), else None."""
    so_peercred = getattr(socket, "SO_PEERCRED", None)
    if so_peercred is None:
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, so_peercred, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid


def default_socket_path() -> Path:
    """`$KBV3_SOCKET`, else `$XDG_RUNTIME_DIR/kbv3/serve.sock`, else `<cache root>/serve/serve.sock`."""
    if os.environ.get("KBV3_SOCKET"):
        return Path(os.environ["KBV3_SOCKET"])
    if os.environ.get("XDG_RUNTIME_DIR"):
        return Path(os.environ["XDG_RUNTIME_DIR"]) / "kbv3" / "serve.sock"
    from ..paths import cache_root

    return cache_root() / "serve" / "serve.sock"


# ----------------------------------------------------------------------------- requests


def option_names() -> tuple[str, ...]:
    from ..evaluate import EvalOptions

    return tuple(f.name for f in dataclasses.fields(EvalOptions)) + PLACEMENT


def json_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Options as JSON values: tuples become lists, a sizes mapping a dict."""
    out: dict[str, Any] = {}
    for name, value in options.items():
        if isinstance(value, tuple):
            value = [list(v) if isinstance(v, tuple) else v for v in value]
        elif isinstance(value, Mapping):
            value = dict(value)
        out[name] = value
    return out


def parse_evaluate(message: Mapping[str, Any], device: str) -> dict[str, Any]:
    """The checked job of an `evaluate` message on a service running on `device`: the
    EvalRequest's fields (JSON), the source or the solution path, the placement. BadRequest for
    anything wrong, with a line that says what."""
    from ..evaluate import EvalRequest

    allowed = {"kind", "problem_id", "source", "solution_path", "options", "gpu_index", "problems_dir", "cache_dir"}
    unknown = sorted(set(message) - allowed)
    if unknown:
        raise BadRequest(f"unknown request field(s) {', '.join(unknown)}; a request has {', '.join(sorted(allowed))}")
    problem_id = message.get("problem_id")
    if not isinstance(problem_id, str) or not problem_id:
        raise BadRequest("the request names no problem_id (e.g. level1/23_Softmax)")
    source, path = message.get("source"), message.get("solution_path")
    if (source is None) == (path is None):
        raise BadRequest("a request has either the solution's source text or its solution_path, not both or neither")
    if source is not None and not isinstance(source, str):
        raise BadRequest("source must be the solution's text")
    if path is not None:
        if not isinstance(path, str) or not os.path.isabs(path):
            raise BadRequest(f"solution_path must be an absolute path, got {path!r}")
        if not os.path.isfile(path):
            raise BadRequest(f"solution file {path} does not exist")
    options = message.get("options") or {}
    if not isinstance(options, dict):
        raise BadRequest("options must be an object of EvalOptions fields")
    names = option_names()
    unknown = sorted(set(options) - set(names))
    if unknown:
        raise BadRequest(f"unknown option(s) {', '.join(unknown)}; the options are {', '.join(names)}")
    options = dict(options)
    asked = options.pop("device", None)
    if asked is not None and asked != device:
        raise BadRequest(f"this service evaluates on {device}, not {asked!r}; start one with --device {asked}")
    gpu_index = message.get("gpu_index")
    if gpu_index is not None and (not isinstance(gpu_index, int) or isinstance(gpu_index, bool)):
        raise BadRequest(f"gpu_index must be a GPU index or null, got {gpu_index!r}")
    dirs = {}
    for name in ("problems_dir", "cache_dir"):
        value = message.get(name)
        if value is not None and (not isinstance(value, str) or not os.path.isabs(value)):
            raise BadRequest(f"{name} must be an absolute path, got {value!r}")
        dirs[name] = value
    sizes = options.get("sizes")
    if isinstance(sizes, dict):
        options["sizes"] = tuple(sorted(sizes.items()))
    elif isinstance(sizes, list):
        options["sizes"] = tuple(tuple(p) for p in sizes)
    try:
        request = EvalRequest(problem_id, path or SOURCE_LABEL, device=device, **options)
    except (TypeError, ValueError) as exc:
        raise BadRequest(f"bad options: {exc}") from None
    try:
        from ..catalog.problem import get_problem

        get_problem(problem_id, dirs["problems_dir"])
    except (KeyError, OSError, ValueError) as exc:
        raise BadRequest(str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)) from None
    return {
        "request": request_to_json(request),
        "source": source,
        "solution_path": path,
        "gpu_index": gpu_index,
        **dirs,
    }


def request_to_json(request: Any) -> dict[str, Any]:
    """An EvalRequest's fields as JSON values (solution_path as a string)."""
    fields = {f.name: getattr(request, f.name) for f in dataclasses.fields(request)}
    fields["solution_path"] = str(fields["solution_path"])
    return json_options(fields)


def request_from_json(fields: Mapping[str, Any], solution_path: str | Path) -> Any:
    """The EvalRequest of `request_to_json` output, evaluating `solution_path`."""
    from ..evaluate import EvalRequest

    fields = dict(fields)
    fields["solution_path"] = solution_path
    fields["sizes"] = tuple(tuple(p) for p in fields.get("sizes") or ())
    fields["seeds"] = tuple(fields.get("seeds") or ())
    fields["extra"] = tuple(tuple(p) for p in fields.get("extra") or ())
    return EvalRequest(**fields)


def error_record(job: Mapping[str, Any], error: str) -> dict[str, Any]:
    """The Record (as a dict) of a request the service could not evaluate: status error, `error`
    saying why, and what is known of the problem and the solution."""
    import hashlib

    from ..evaluate import Record
    from ..vocab import runs_gpu_name

    fields = job["request"]
    problem_id = str(fields["problem_id"])
    if job.get("source") is not None:
        blob, shown = job["source"].encode("utf-8"), SOURCE_LABEL
    else:
        shown = str(job.get("solution_path") or fields["solution_path"])
        try:
            blob = Path(shown).read_bytes()
        except OSError:
            blob = None
    record = Record(
        model=str(fields.get("model") or ""),
        gpu=runs_gpu_name(str(fields.get("gpu") or "h100")),
        problem_id=problem_id,
        problem=problem_id.rsplit("/", 1)[-1] + ".py",
        solution_path=shown,
        solution_sha256=hashlib.sha256(blob).hexdigest() if blob is not None else "",
        device=fields.get("device") or "",
        seeds=list(fields.get("seeds") or []),
        tolerance_mode=str(fields.get("tolerance") or "v3"),
    )
    try:
        from ..catalog.problem import get_problem

        problem = get_problem(problem_id, job.get("problems_dir"))
        record.level, record.op_type, record.problem = problem.level, problem.op_type, problem.file_name
        record.problem_sha256 = problem.sha256
    except (KeyError, OSError, ValueError):
        pass
    return record.fail("error", error).to_dict()
