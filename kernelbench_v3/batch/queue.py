"""A batch's unit of work: one item (a solution for one problem on one GPU), the settings that
change its results, and the queue that hands items out so that each (problem, GPU) baseline is
built once.

Shared by `batch` (which finds, journals and orders the work) and `executors` (which run it);
it sits below both, so executors need not import batch (batch imports executors to run a batch).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..evaluate import EvalOptions
from ..vocab import Device, SizeMode, Split
from .journal import Key


@dataclass(frozen=True)
class BatchItem:
    """One evaluation of a batch: a solution file for one problem on one target GPU."""

    model: str
    gpu: str  # runs-dataset GPU name of the split, e.g. "H100"
    problem_id: str
    solution_path: str
    solution_sha256: str
    sample: int | None = None  # the sample's index in the samples layout (runs.sample_files)
    # A sample without a solution file (no code in the response, a failed request): why. Such an
    # item is recorded as failed without an evaluation; solution_path and solution_sha256 are "".
    missing: str = ""

    @property
    def key(self) -> Key:
        return (self.model, self.gpu, self.problem_id, self.solution_sha256, self.sample)


# A batch's default limit per step: a batch favours moving on over waiting (eval's is 600 s).
BATCH_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class BatchSettings:
    """Everything that changes a batch's results; a journal only resumes under equal settings."""

    split: Split
    device: Device = "cuda"
    sizes: SizeMode = "default"  # "reduced": each problem's REDUCED_SIZES
    problems_root: str | None = None
    options: EvalOptions = EvalOptions()  # how every solution is judged

    @property
    def timeout_s(self) -> float:
        """The longest one step of one solution run may take (the watchdog's measure): the
        options' explicit limit, else `BATCH_TIMEOUT_S` (the evaluator derives shorter ones)."""
        return self.options.timeout_s or BATCH_TIMEOUT_S

    def to_dict(self) -> dict[str, Any]:
        """What the journal stores and compares; options that keep their defaults are left out."""
        changed = self.options.changed()
        changed.pop("timeout_s", None)
        return {
            "split": self.split,
            "device": self.device,
            "sizes": self.sizes,
            "timeout_s": self.timeout_s,
            "problems_root": self.problems_root,
            "evaluator_options": changed,
        }


class WorkQueue:
    """The evaluations still to run, handed out so that each (problem, GPU) baseline is built once.

    The first evaluation of a problem runs alone ("warming"); the others of that problem wait
    until it has finished and its baseline sits in the evaluator's on-disk cache, so two workers
    never compile the same baseline at once. Meanwhile workers take other problems, and each
    worker keeps to one problem while it has items (`take(prefer=...)`). (The
    evaluator builds the baseline before it runs the solution, so any finished first
    evaluation has either cached it or failed at it; a retry one at a time would not help.)
    """

    def __init__(
        self,
        items: Iterable[BatchItem],
        warm: Iterable[tuple[str, str]] = (),
        on_take: Callable[[BatchItem], None] | None = None,
        on_put_back: Callable[[BatchItem], None] | None = None,
    ):
        self._on_take = on_take  # told of each item as a worker takes it (progress names it)
        self._on_put_back = on_put_back  # told of each item taken and handed back unfinished
        self._pending: list[BatchItem] = list(items)
        self._warm: set[tuple[str, str]] = set(warm)
        self._warming: set[tuple[str, str]] = set()
        self._running: set[Key] = set()
        self._running_items: dict[Key, BatchItem] = {}

    @staticmethod
    def group(item: BatchItem) -> tuple[str, str]:
        return (item.problem_id, item.gpu)

    def take(self, prefer: tuple[str, str] | None = None) -> BatchItem | None:
        """The next evaluation that may start now, or None (all done, or waiting on a baseline).

        Work is grouped by problem: a worker that passes the group it last ran (`prefer`) gets
        more of that problem while there is some; otherwise a problem no one is running yet,
        in batch order; only then one another worker is on. So each worker switches problems
        about once per problem it owns rather than once per item.
        """
        takeable = [i for i, it in enumerate(self._pending) if self._may_start(self.group(it))]
        if not takeable:
            return None
        busy = {self.group(it) for it in self._running_items.values()}
        index = next(
            (i for i in takeable if prefer is not None and self.group(self._pending[i]) == prefer),
            next((i for i in takeable if self.group(self._pending[i]) not in busy), takeable[0]),
        )
        item = self._pending.pop(index)
        group = self.group(item)
        if group not in self._warm:
            self._warming.add(group)
        self._running.add(item.key)
        self._running_items[item.key] = item
        if self._on_take is not None:
            self._on_take(item)
        return item

    def _may_start(self, group: tuple[str, str]) -> bool:
        return group in self._warm or group not in self._warming

    def finish(self, item: BatchItem, record: dict[str, Any]) -> None:
        group = self.group(item)
        self._running.discard(item.key)
        self._running_items.pop(item.key, None)
        if group in self._warming:
            self._warming.discard(group)
            self._warm.add(group)

    def put_back(self, item: BatchItem) -> None:
        """An item taken but not finished (its evaluation was lost to another's fault): it is the
        next to start, and a problem it was warming may be warmed by another item."""
        self._running.discard(item.key)
        self._running_items.pop(item.key, None)
        self._warming.discard(self.group(item))
        self._pending.insert(0, item)
        if self._on_put_back is not None:
            self._on_put_back(item)

    @property
    def running(self) -> int:
        return len(self._running)

    def finished(self) -> bool:
        return not self._pending and not self._running
