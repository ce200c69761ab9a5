"""Entry point of the evaluator's child processes: `python -m kernelbench_v3.evaluate.child ROLE DIR`.

Reads `DIR/spec.json`, runs the role (`reference`, `candidate` or `baseline`), writes
`DIR/result_<ROLE>.json` atomically and leaves with `os._exit`, so no exit handler a solution
registered can run after the result is written. The candidate role first reads a per-run nonce
from stdin (before the solution is imported) and puts it in its result, so a file a solution
forged without it is recognised. Nothing on stdout is ever read as a result.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path


def _write(path: Path, payload: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, default=str), encoding="utf-8")
    os.replace(tmp, path)


def main(role: str, workdir: Path) -> None:
    nonce = sys.stdin.readline().strip() if role == "candidate" else ""
    spec = json.loads((workdir / "spec.json").read_text(encoding="utf-8"))
    result_path = workdir / f"result_{role}.json"
    try:
        if role == "reference":
            from .reference import main as run
            payload = run(spec, workdir)
        elif role == "candidate":
            from .candidate import main as run_candidate
            payload = run_candidate(spec, workdir, nonce)
        elif role == "baseline":
            from .baseline import child_main
            payload = child_main(spec, workdir)
        else:
            raise ValueError(f"unknown child role {role!r}")
        payload = {"ok": True, **payload}
    except BaseException as exc:  # report everything, including SystemExit from the problem
        payload = {
            "ok": False, "nonce": nonce,
            "error": f"{type(exc).__name__}: {exc}"[:1000],
            "traceback": traceback.format_exc()[-4000:],
        }
    try:
        _write(result_path, payload)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
