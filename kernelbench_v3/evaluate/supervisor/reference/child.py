"""Entry point of the evaluator's reference-only child processes: `python -m kernelbench_v3.evaluate.supervisor.reference.child ROLE DIR`.

Only trusted code runs here (today the `baseline` role: the reference timed eager and compiled);
solutions run in the sandboxed solution process instead (`worker`). Reads `DIR/spec.json`, runs
the role, writes `DIR/result_<ROLE>.json` atomically and leaves with `os._exit`. Nothing on stdout
is ever read as a result.

A child never outlives the evaluating process (`die_with_parent`): the child runs in its own
session, so a SIGKILL of the parent (a batch killed midway) would otherwise leave it running, a
hanging solution forever. On Linux the kernel kills it (PR_SET_PDEATHSIG); everywhere, a watch
thread kills its process group once the parent pid changes.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

from ....paths import write_atomically
from ...lifetime import PARENT_PID_ENV, die_with_parent


def _write(path: Path, payload: dict) -> None:
    write_atomically(path, json.dumps(payload, default=str))


def run_role(role: str, workdir: Path, extra: dict | None = None) -> None:
    """Run `role` on `workdir/spec.json` and write `workdir/result_<role>.json` (with `extra`'s
    fields); never raises for what the role does. Both ways of starting a child end here: this
    module as a program (`main`) and a fork of the baseline server (`baseline_server`)."""
    spec = json.loads((workdir / "spec.json").read_text(encoding="utf-8"))
    try:
        if role == "baseline":
            from .baseline_child import child_main

            payload = child_main(spec, workdir)
        else:
            raise ValueError(f"unknown child role {role!r}")
        payload = {"ok": True, **payload, **(extra or {})}
    except BaseException as exc:  # report everything, including SystemExit from the problem
        payload = {
            "ok": False,
            "error": f"{type(exc).__name__}: {exc}"[:1000],
            "traceback": traceback.format_exc()[-4000:],
        }
    _write(workdir / f"result_{role}.json", payload)


def main(role: str, workdir: Path) -> None:
    die_with_parent(int(os.environ.get(PARENT_PID_ENV) or 0))
    try:
        run_role(role, workdir)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
