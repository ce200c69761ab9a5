"""One supervisor worker process of `kbv3 serve`: warm, one evaluation at a time.

Started by the service with its GPU pinned (`CUDA_VISIBLE_DEVICES`) and one end of a socket pair
as `--fd`. It keeps its zygote warm (`keep_zygotes_warm`), so every solution still gets a fresh,
sandboxed process forked from it, and the last problem's reference in memory (`workers.warm_up`,
as a batch worker does); then it says
`ready` and answers `evaluate` frames with `record` (or `error` for a request `evaluate` refused)
until told to `stop` or its service goes away.

    python -m kernelbench_v3.serve.worker --fd 5 --device cuda --name gpu0
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

from .. import workers
from .protocol import SOURCE_LABEL, Conn, PeerGone, error_record, request_from_json


def evaluate_job(job: dict[str, Any]) -> dict[str, Any]:
    """The reply to one `evaluate` frame: the record, or an error for a request evaluate refused."""
    from ..evaluate import evaluate

    with tempfile.TemporaryDirectory(prefix="kbv3-serve-") as tmp:
        path = job.get("solution_path")
        if job.get("source") is not None:
            os.chmod(tmp, 0o700)
            path = str(Path(tmp) / "solution.py")
            Path(path).write_text(job["source"], encoding="utf-8")
        try:
            request = request_from_json(job["request"], path)
            record = evaluate(request, problems_dir=job.get("problems_dir"), cache_dir=job.get("cache_dir"))
        except (KeyError, ValueError, TypeError, FileNotFoundError) as exc:
            return {"kind": "error", "error": str(exc)[:4000]}
        except Exception:
            tail = traceback.format_exc(limit=8)[-2000:]
            return {"kind": "record", "record": error_record(job, f"evaluator raised: {tail}")}
    if job.get("source") is not None:
        record.solution_path = SOURCE_LABEL
    return {"kind": "record", "record": record.to_dict()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kbv3-serve-worker")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--device", choices=("cuda", "cpu"), required=True)
    parser.add_argument("--name", default="worker")
    args = parser.parse_args(argv)
    workers.exit_when_orphaned(os.getppid())
    conn = Conn(socket.socket(fileno=args.fd))
    workers.warm_up(start_on=args.device, wait=True)  # pay torch, the zygote and CUDA before `ready`
    try:
        conn.send({"kind": "ready", "pid": os.getpid(), "name": args.name})
        while True:
            message = conn.receive()
            if message["kind"] == "stop":
                return 0
            if message["kind"] != "evaluate":
                conn.send({"kind": "error", "error": f"a worker answers evaluate frames, not {message['kind']!r}"})
                continue
            conn.send({"kind": "started"})
            conn.send(evaluate_job(message))
            if workers.cuda_context_lost():  # the record is sent; the service starts a fresh worker
                return 3
    except PeerGone:
        return 0


if __name__ == "__main__":
    sys.exit(main())
