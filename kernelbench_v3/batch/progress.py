"""Progress of a running batch on stderr, and its throughput once finished.

Owns what a person watching `eval-batch` sees while it runs and the figures a finished batch
reports: evaluations per hour per worker (two workers per GPU locally by default; per node and GPU under
Ray) and in total, and the ETA. On a terminal it is a tqdm bar whose postfix carries the
verdict counts and each worker's rate; elsewhere (a log file, CI) it prints one plain line every
`every_n` records and at least every `every_s` seconds, so a log shows progress without a
carriage-return bar. Each evaluation is named as it starts (a plain line, or the bar's
description), and the periodic line names what is running, so a slow first evaluation is never
a silent wait. `Throughput` is computed from the records of this run and the run's wall
clock alone: `evals_per_hour = n / (wall_s / 3600)`.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

EVERY_S = 10.0  # non-TTY: a line at least this often (as `kbv3 eval` and the demo)


@dataclass
class WorkerThroughput:
    evaluations: int
    evals_per_hour: float
    mean_eval_s: float | None  # mean of the records' duration_s


@dataclass
class Throughput:
    """What one run of a batch got through: this invocation's evaluations only."""

    evaluations: int
    wall_s: float
    evals_per_hour: float
    workers: dict[str, WorkerThroughput] = field(default_factory=dict)

    @classmethod
    def from_records(cls, by_worker: dict[str, list[dict[str, Any]]], wall_s: float) -> Throughput:
        hours = max(wall_s, 1e-9) / 3600.0
        workers = {}
        for name, records in sorted(by_worker.items()):
            durations = [float(r["duration_s"]) for r in records if isinstance(r.get("duration_s"), (int, float))]
            mean = sum(durations) / len(durations) if durations else None
            workers[name] = WorkerThroughput(len(records), len(records) / hours, mean)
        n = sum(w.evaluations for w in workers.values())
        return cls(n, wall_s, n / hours, workers)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        per = ", ".join(f"{name} {w.evals_per_hour:.1f}/h ({w.evaluations})" for name, w in self.workers.items())
        return (
            f"throughput: {self.evaluations} evaluations in {self.wall_s:.1f}s = {self.evals_per_hour:.1f} evals/h"
            + (f"; per worker: {per}" if per else "")
        )


def _clock(seconds: float) -> str:
    seconds = int(max(0.0, seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class Progress:
    """Counts records as they arrive (`record`), shows progress, and ends with `finish`."""

    def __init__(
        self,
        total: int,
        enabled: bool = True,
        *,
        stream: TextIO | None = None,
        every_n: int | None = None,
        every_s: float = EVERY_S,
        tty: bool | None = None,
        clock=time.monotonic,
    ):
        self.total, self.enabled, self.clock = total, enabled and total > 0, clock
        self.stream = stream if stream is not None else sys.stderr
        self.tty = tty if tty is not None else bool(getattr(self.stream, "isatty", lambda: False)())
        self.every_n = every_n or max(1, total // 20)
        self.every_s = every_s
        self.started = clock()
        self.statuses: Counter = Counter()
        self.by_worker: dict[str, list[dict[str, Any]]] = {}
        self.running: list[str] = []  # labels of the evaluations started and not yet recorded
        self._again: set[str] = set()  # labels handed back unfinished, to be started again
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._last_line = self.started
        self._bar = None
        self._ticker = None
        if not self.enabled:
            return
        if self.tty:
            from tqdm import tqdm

            self._bar = tqdm(
                total=total, desc="eval-batch", unit="eval", dynamic_ncols=True, smoothing=0.1, file=self.stream
            )
        elif every_s > 0:
            self._ticker = threading.Thread(target=self._tick, name="kbv3-batch-progress", daemon=True)
            self._ticker.start()

    @property
    def done(self) -> int:
        return sum(self.statuses.values())

    def rates(self) -> dict[str, float]:
        hours = max(self.clock() - self.started, 1e-9) / 3600.0
        return {name: len(records) / hours for name, records in sorted(self.by_worker.items())}

    def eta_s(self) -> float | None:
        done, elapsed = self.done, self.clock() - self.started
        return None if not done else (self.total - done) * elapsed / done

    def starting(self, label: str) -> None:
        """An evaluation (`label`: its problem and model) has been handed to a worker."""
        with self._lock:
            self.running.append(label)
            if not self.enabled:
                return
            if self._bar is not None:
                self._bar.set_description_str(f"eval-batch {label}", refresh=True)
            else:
                started = self.done + len(self.running)
                again = " again" if label in self._again else ""
                print(f"eval-batch: started {label}{again} ({started}/{self.total})", file=self.stream, flush=True)
                self._last_line = self.clock()
            self._again.discard(label)

    def put_back(self, label: str) -> None:
        """An evaluation started but not finished (lost to another's fault): no longer running;
        it will be started again and counted once."""
        with self._lock:
            if label in self.running:
                self.running.remove(label)
            self._again.add(label)

    def record(self, record: dict[str, Any], worker: str = "", label: str | None = None) -> None:
        with self._lock:
            if label is not None and label in self.running:
                self.running.remove(label)
            self.statuses[record.get("status", "?")] += 1
            self.by_worker.setdefault(worker or "worker", []).append(record)
            if not self.enabled:
                return
            if self._bar is not None:
                postfix = {**_postfix(self.statuses), **{k: f"{v:.0f}/h" for k, v in self.rates().items()}}
                self._bar.set_postfix(postfix, refresh=False)
                self._bar.update(1)
            elif self.done % self.every_n == 0 or self.done == self.total:
                self._print()

    def status_line(self) -> str:
        done, elapsed = self.done, self.clock() - self.started
        eta = self.eta_s()
        rates = ", ".join(f"{k} {v:.1f}/h" for k, v in self.rates().items())
        total_rate = done / max(elapsed, 1e-9) * 3600.0
        counts = ", ".join(f"{s} {n}" for s, n in _postfix(self.statuses).items())
        return (
            f"eval-batch {done}/{self.total} ({100.0 * done / max(self.total, 1):.0f}%) "
            f"elapsed {_clock(elapsed)}, ETA {_clock(eta) if eta is not None else '?'}, "
            f"{total_rate:.1f} evals/h"
            + (f" [{rates}]" if rates else "")
            + (f"; {counts}" if counts else "")
            + (f"; running: {', '.join(self.running)}" if self.running else "")
        )

    def _print(self) -> None:
        self._last_line = self.clock()
        print(self.status_line(), file=self.stream, flush=True)

    def _tick(self) -> None:
        while not self._stop.wait(min(self.every_s, 1.0)):
            with self._lock:
                if self.clock() - self._last_line >= self.every_s:
                    self._print()

    def finish(self) -> Throughput:
        """Stop showing progress; the throughput of this run, from its records."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(2)
        if self._bar is not None:
            self._bar.close()
        with self._lock:
            return Throughput.from_records(self.by_worker, self.clock() - self.started)


def _postfix(statuses: Counter) -> dict[str, int]:
    failures = sum(n for s, n in statuses.items() if s != "correct")
    return {
        "correct": statuses.get("correct", 0),
        "failures": failures,
        **{s: n for s, n in sorted(statuses.items()) if s != "correct"},
    }


__all__ = ["EVERY_S", "Progress", "Throughput", "WorkerThroughput"]
