"""The life of a long-lived evaluation worker process, shared by `batch` (the workers of a
batch, two per GPU by default) and `serve` (one warm worker per GPU of the service).

Owns what both kinds of worker must agree on: the watchdog (how long past a request's own step
limit a silent worker is presumed stuck, and the separate allowance for its start), dying with
the process that started it (a batch or service killed by SIGKILL leaves no worker evaluating
for nobody), warming the supervisor up (the zygote kept across evaluations, the last
problem's reference kept in memory, CUDA initialised), so that both pay their start-up once, and
leaving after a record when this process's CUDA context is lost (`cuda_context_lost`).
The pool of warm zygotes itself is the evaluator's (`evaluate.supervisor.run`).
"""

from __future__ import annotations

import logging
import os
import threading
import time

# Past the evaluator's own per-step limit (timeout_s), how long a worker may stay silent before
# its owner assumes the evaluator itself is stuck: an evaluation runs a few children (reference,
# baseline compile, solution), each bounded by timeout_s.
WATCHDOG_FACTOR = 4.0
WATCHDOG_SLACK_S = 120.0
# A worker's start (spawn, torch, its zygote, CUDA) has its own allowance: the watchdog of a
# request starts when the worker says it has begun it, so a slow start on a busy host costs none.
WORKER_START_S = 600.0
DEFAULT_TIMEOUT_S = 600.0  # a request without its own step limit
ORPHAN_POLL_S = 0.5

log = logging.getLogger(__name__)


def watchdog_s(timeout_s: float | None) -> float:
    """How long a worker may stay silent on a request whose steps are bounded by `timeout_s`."""
    return float(timeout_s or DEFAULT_TIMEOUT_S) * WATCHDOG_FACTOR + WATCHDOG_SLACK_S


def exit_when_orphaned(parent_pid: int) -> threading.Thread:
    """Start a watch that ends this process once `parent_pid` is no longer its parent (the
    batch or the service died, even by SIGKILL): never go on evaluating for nobody."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(ORPHAN_POLL_S)
        os._exit(1)

    thread = threading.Thread(target=watch, name="kbv3-orphan-watch", daemon=True)
    thread.start()
    return thread


def warm_up(start_on: str | None = None, wait: bool = False) -> None:
    """Keep the supervisor warm across this process's evaluations: one zygote per device (each
    solution still gets a fresh, sandboxed process forked from it) and its last problems'
    references (`keep_references_warm`: the last one, and others within byte budgets).
    `start_on` (a device) launches the zygote here rather than in the first request, then
    imports the supervisor (torch, Triton) beside it and opens CUDA (the service and the local
    batch workers do; a Ray task, whose device is the task's, starts it with its first
    evaluation). `wait`: also wait for the zygote's ready, so the first request finds it warm
    (the service, which says `ready` after this; a batch worker's first item overlaps it instead).
    Called again, it keeps what is warm."""
    from .evaluate import keep_references_warm, keep_zygotes_warm, load_supervisor, start_warm_zygote

    keep_zygotes_warm()
    keep_references_warm()
    if start_on is None:
        return
    zygote = None
    try:
        zygote = start_warm_zygote(start_on)
    except Exception:  # the first evaluation starts it again, and reports what goes wrong
        log.exception("could not start the warm zygote for %s ahead of the first request", start_on)
    load_supervisor()
    if start_on == "cuda":
        import torch

        torch.cuda.init()
    if wait and zygote is not None:
        try:
            zygote.wait_ready()
        except Exception:  # a zygote that died: the first evaluation starts another and says why
            log.exception("the warm zygote for %s did not become ready", start_on)


def cuda_context_lost() -> bool:
    """Whether this process's CUDA context can no longer run work (`evaluate.mps`). Under MPS a
    fatal fault of one client reaches every client of the server, the supervisor's too (seen on
    the H200: one faulting solution turned the next eleven evaluations of the process into
    `error` records). A worker asks after each record and, when lost, exits: its owner replaces
    it with a fresh process and a fresh context."""
    from .evaluate import cuda_context_lost as why_lost

    why = why_lost()
    if why:
        log.warning("%s; the worker exits and is replaced", why)
    return bool(why)
