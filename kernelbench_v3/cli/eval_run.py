"""`kbv3 eval`'s own seconds: its start-up overlapped, and every second in a named step.

Run one after the other, a `kbv3 eval` on a GPU paid the MPS daemon's start and its client probe,
the supervisor's import of torch, the device probe, and then, inside the evaluation, the zygote's
own import of torch before the solution's fork. Only the device probe needs what comes before it
(a CUDA context joins MPS only when it is made, so nothing opens one before the daemon is ready);
the rest overlaps:

1. `zygote_launch`: the zygote is launched first (where `--device` names the device without
   asking torch) and imports torch beside everything below; the MPS folders reach its children
   with each spawn, so it need not wait for the daemon;
2. `supervisor_import`: this process imports torch and the evaluator while the daemon starts on
   a thread (`mps.starting`, begun by `main`);
3. `mps_daemon`, `mps_probe`: what is left of the daemon's start and of its client probe;
4. `device_probe`: torch's view of CUDA, after the daemon; without `--device`, the default device
   (and then the zygote is launched here);
5. `evaluation`: the record's own phases (`Record.phase_s`), with the zygote's remaining start in
   `solution_zygote_wait`;
6. `teardown`: closing the zygote, before the record is written out.

`Wall.finish` puts the breakdown into the record (`evaluate.wall`); what ran beside it (the
zygote's start, the daemon's start and probe) goes into `wall_background_s`.
"""

from __future__ import annotations

import argparse
import threading
from typing import Any

from .args import check_cuda, default_device
from .heartbeat import HEARTBEAT_S, heartbeat, say_on_stderr
from .options import eval_options_from


def _launch_zygote(device: str) -> Any:
    """The warm zygote for `device`, launched now; None when it cannot be (the evaluation then
    starts its own and its record says what went wrong)."""
    from ..evaluate import start_warm_zygote
    from .served import SERVER_MODULE

    try:  # a server launched now serves later `kbv3 eval` runs whole (`served`)
        return start_warm_zygote(device, served=True, server_module=SERVER_MODULE)
    except Exception:  # noqa: BLE001 - the evaluation's own start reports the failure
        return None


def evaluate_here(args: argparse.Namespace, sizes: dict[str, Any]) -> Any:
    """Evaluate in this process with every step named on `args.wall`; returns the record with its
    `wall_*` fields filled."""
    from ..evaluate import Wall, close_warm_zygotes, device_name, evaluate, load_supervisor

    wall = getattr(args, "wall", None) or Wall()
    mps = getattr(args, "mps", None)
    zygote = None
    if args.device is not None:
        wall.to("zygote_launch")
        zygote = _launch_zygote(args.device)
    try:
        wall.to("supervisor_import")
        if args.device == "cuda":  # the record's GPU name (nvidia-smi, memoized) asked beside the import
            threading.Thread(target=device_name, args=("cuda",), name="kbv3-gpu-name", daemon=True).start()
        load_supervisor()
        if mps is not None:
            wall.to("mps_daemon")
            mps.ready()
            wall.split(mps.daemon_done_at, "mps_probe")
        wall.to("device_probe")
        if args.device == "cuda":
            check_cuda("--device cuda")
        device = args.device or default_device()
        if zygote is None:
            wall.to("zygote_launch")
            zygote = _launch_zygote(device)
        wall.to("cli_args")
        request = eval_options_from(args).request(
            args.problem, args.solution, gpu=args.gpu, device=device, sizes=sizes, model=args.model
        )
        # Said once every usage check has passed (CUDA asked where none is, say): a refused
        # command is one line on stderr, nothing before it.
        say_on_stderr(f"kbv3 eval: evaluating {args.problem} on {device} (a line every {HEARTBEAT_S:g} s) ...")
        wall.to("evaluation")
        with heartbeat(args.problem, say_on_stderr):
            record = evaluate(request, problems_dir=args.problems, cache_dir=args.cache)
    finally:
        wall.to("teardown")
        close_warm_zygotes()
    if zygote is not None:
        wall.beside("zygote_start", zygote.start_s)
    if mps is not None:
        wall.beside("mps_daemon_start", mps.daemon_s)
        wall.beside("mps_probe", mps.probe_s)
    return wall.finish(record)


__all__ = ["evaluate_here"]
