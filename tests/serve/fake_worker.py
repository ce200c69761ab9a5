"""A stand-in for `kernelbench_v3.serve.worker` that speaks its protocol without torch.

What it does with a request is read from the request's `model` field: `sleep=S` (answer after
S seconds), `wait=PATH` (answer once PATH exists: a test opens it when it is ready, so no
sleep races a loaded machine), `hang` (never answer), `hang-detached=PATH` (never answer, below a
stand-in zygote that holds a process detached into its own session, its pid written to PATH), `crash` (die by SIGKILL mid-request), `raise` (refuse it as a
bad request); anything else answers at once. Every record names the worker's pid in `warnings`.
"""

import argparse
import os
import signal
import socket
import sys
import time

from kernelbench_v3.evaluate import Record
from kernelbench_v3.serve.protocol import Conn, PeerGone


def zygote_with_a_detached_process(pid_file: str) -> None:
    """Fork what the evaluator's zygote is (a subreaper that dies with its parent) holding what a
    solution detached (a double fork into a session of its own), whose pid lands in `pid_file`;
    return once it is there (a test's watchdog kill comes after the detach, never before)."""
    import ctypes

    if os.fork() == 0:
        libc = ctypes.CDLL(None)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        if os.fork() == 0:
            if os.fork() == 0:
                os.setsid()
                with open(pid_file + ".tmp", "w") as f:
                    f.write(str(os.getpid()))
                os.rename(pid_file + ".tmp", pid_file)
                time.sleep(3600)
            os._exit(0)
        time.sleep(3600)
        os._exit(0)
    while not os.path.exists(pid_file):
        time.sleep(0.01)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--device", required=True)
    parser.add_argument("--name", default="fake")
    args = parser.parse_args()
    conn = Conn(socket.socket(fileno=args.fd))
    try:
        conn.send({"kind": "ready", "pid": os.getpid()})
        while True:
            message = conn.receive()
            if message["kind"] == "stop":
                return 0
            conn.send({"kind": "started"})
            request = message["request"]
            what = request.get("model") or ""
            if what.startswith("sleep="):
                time.sleep(float(what.partition("=")[2]))
            elif what.startswith("wait="):
                gate = what.partition("=")[2].partition("#")[0]
                while not os.path.exists(gate):
                    time.sleep(0.01)
            elif what == "hang":
                time.sleep(3600)
            elif what.startswith("hang-detached="):
                zygote_with_a_detached_process(what.partition("=")[2])
                time.sleep(3600)
            elif what == "crash":
                os.kill(os.getpid(), signal.SIGKILL)
            elif what == "raise":
                conn.send({"kind": "error", "error": "refused by the fake worker"})
                continue
            record = Record(
                model=what,
                problem_id=request["problem_id"],
                device=args.device,
                correct=True,
                status="correct",
                solution_path=message.get("solution_path") or "<source>",
                warnings=[f"pid={os.getpid()}", f"worker={args.name}", f"source={message.get('source')!r}"],
            )
            conn.send({"kind": "record", "record": record.to_dict()})
    except PeerGone:
        return 0


if __name__ == "__main__":
    sys.exit(main())
