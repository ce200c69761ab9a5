"""One evaluation's baseline, its child started ahead of the reference phase.

A cold baseline child spends most of its wall before it times anything: the interpreter and
torch's import, the build, and compiling (`baseline_child.child_main`). `BaselineAhead` starts it
before the evaluation's reference phase, so those seconds run beside the reference, while the
timing still overlaps nothing of the evaluation: the evaluation holds the child's timing lock
(`baseline_child.timing_lock`, a file in the evaluation's work folder) from before the launch until
the reference phase ends (`release`), and the child takes it only to time. The evaluation then
waits for the child (`result`) before anything else of it runs. Meanwhile the child's time
limit does not run (`isolate.run_child`'s `pause_limit`): waiting for the reference is not the
child's slowness.

A cached baseline starts nothing: `result` is the cache's entry, as `baseline.obtain` gives it.
The child runs in a thread around the blocking `isolate.run_child`, which also files its outcome
in the cache (`baseline.settle`) as soon as it ends, so a finished baseline is kept whatever the
evaluation does next. `stop` (the evaluation ended early: its reference failed) kills a child
still running, caches nothing of it, and frees the lock; it is safe to call at any point, twice.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Any

from .baseline import BaselineJob, cached_baseline, settle
from .baseline_child import child_steps, timing_lock

LOCK_NAME = "baseline_timing.lock"
CHILD_DIR = "baseline"


class BaselineAhead:
    """The baseline of `job`: the cache's entry, or a child launched into `work` (at once, or by
    `launch` once the evaluation holds its GPU turn) that times once `release` is called
    (module docstring)."""

    def __init__(self, job: BaselineJob, work: Path, launch: bool = True):
        self.job, self.work = job, Path(work)
        self.hit = cached_baseline(job)
        self._stop = threading.Event()
        self._held = threading.Event()  # the evaluation holds the lock: the child's limit waits
        self._lock = contextlib.ExitStack()
        self._thread: threading.Thread | None = None
        self._outcome: Any = None
        self._base: dict[str, Any] | None = None
        self._error: BaseException | None = None
        if launch:
            self.launch()

    @property
    def cold(self) -> bool:
        """Whether a child has to build, compile and time this baseline (no cache entry)."""
        return self.hit is None

    def launch(self) -> None:
        """Start the child of a cold baseline (nothing for a cached one, or a second time)."""
        if self.hit is not None or self._thread is not None:
            return
        lock_path = self.work / LOCK_NAME
        folder = self.work / CHILD_DIR
        folder.mkdir(mode=0o700)
        self._lock.enter_context(timing_lock(str(lock_path)))  # taken before the child can look
        self._held.set()
        spec = {**self.job.spec, "timing_lock": str(lock_path)}
        self._thread = threading.Thread(target=self._run, args=(folder, spec), name="kbv3-baseline", daemon=True)
        try:
            self._thread.start()
        except BaseException:
            self._thread = None
            self.release()
            raise

    @property
    def running(self) -> bool:
        """Whether a child of this baseline is still to be waited for."""
        return self._thread is not None and self._thread.is_alive()

    def _run(self, folder: Path, spec: dict[str, Any]) -> None:
        from . import isolate  # looked up at the call, as `baseline.obtain` does

        try:
            self._outcome = isolate.run_child(
                "baseline",
                folder,
                spec,
                timeout_s=self.job.timeout_s,
                env=self.job.env,
                stop=self._stop,
                pause_limit=self._held,
            )
            self._base = settle(self.job, self._outcome)
        except BaseException as exc:  # raised to the evaluation by `result`, as `obtain` would raise it
            self._error = exc

    def release(self) -> None:
        """The evaluation's own work (its reference phase) is done: the child may time."""
        self._lock.close()
        self._held.clear()

    def result(self) -> dict[str, Any]:
        """The baseline, as `baseline.obtain` gives it; timed now, `steps_s` holds what of the
        child's steps the evaluation waited for (they and the phase's rest add up to the wait)
        and `steps_beside_s` what of them ran beside the evaluation's earlier phases."""
        if self.hit is not None:
            return self.hit
        waited_from = time.monotonic()
        self.release()
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._base is not None
        base = dict(self._base)
        if base.get("steps_s") is not None:
            base["steps_s"] = child_steps(self._outcome, since=waited_from)
            base["steps_beside_s"] = child_steps(self._outcome, until=waited_from)
        return base

    def stop(self) -> None:
        """Kill a child still running (nothing of it cached), free the lock, reap the thread."""
        self._stop.set()
        self.release()
        if self._thread is not None:
            self._thread.join()
