"""The durable journal of a batch: an append-only JSONL file, the source of truth of its results.

Owns the journal's file format and its guarantees: a header line holding the batch settings (a
journal only resumes under equal settings), then one record a line, each appended with flush and
fsync before `append` returns (a record reported as done survives a SIGKILL or power loss); the
repair of a torn last line left by a killed writer; an exclusive lock so two batches never write
one journal; and the resume key of a record, `(model, gpu, problem_id, solution_sha256, sample)`
(`sample` None outside the samples layout), with "last journaled record per key wins" and, for a
sample, its latest file replacing the records of the files it had before. What a batch is and
how it runs belongs to `batch`.

Nothing here imports `datasets`, `torch` or `pandas`.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

JOURNAL_FORMAT = 1

Key = tuple[str, str, str, str, int | None]  # (model, gpu, problem_id, solution_sha256, sample)


def _shown(value: Any) -> str:
    """A setting as a person reads it in an error line: `0.8`, `"default"`, `none`; never a repr."""
    return "none" if value is None else json.dumps(value, sort_keys=True)


class JournalError(ValueError):
    """A journal that cannot be used: not a journal, corrupt, other settings, or in use."""


def record_key(record: dict[str, Any]) -> Key:
    sample = record.get("sample")
    return (
        record["model"],
        record["gpu"],
        record["problem_id"],
        record["solution_sha256"],
        None if sample is None else int(sample),
    )


def latest_records(records: Iterable[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    """One record per key, the last journaled one winning (a retried error replaces its first).

    A sample (`sample` set) is one slot of its model and problem: a record for a new file of that
    sample (the run was generated again) replaces the records of its earlier files, so pass@k
    never counts one sample twice."""
    latest: dict[Key, dict[str, Any]] = {}
    slot_of: dict[tuple[str, str, str, int], Key] = {}
    for record in records:
        key = record_key(record)
        if key[4] is not None:
            slot = (key[0], key[1], key[2], key[4])
            previous = slot_of.get(slot)
            if previous is not None and previous != key:
                latest.pop(previous, None)
            slot_of[slot] = key
        latest[key] = record
    return latest


class Journal:
    """An append-only JSONL file: a header line with the batch settings, then one record a line.

    `settings` is the batch's settings object (anything with `to_dict()`). Each append is
    flushed and fsync'd before it returns, so a record that was reported as done survives a
    SIGKILL or power loss. A torn last line (the process died mid-write) is cut off when the
    journal is reopened. An exclusive lock keeps two batches from writing one journal.
    """

    def __init__(self, path: Path | str, settings: Any):
        self.path = Path(path)
        self.settings = settings
        self._file = None
        self._lock = None
        self.existing: list[dict[str, Any]] = []  # records found when opened

    def __enter__(self) -> Journal:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> list[dict[str, Any]]:
        """Lock, check or write the header, repair a torn tail; return the records so far."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        try:
            header, records, good_bytes = read_journal(self.path)
        except JournalError:
            self.close()
            raise
        wanted = json.loads(json.dumps(self.settings.to_dict()))  # as it reads back
        if header is not None and header["settings"] != wanted:
            self.close()
            changed = "; ".join(
                f"{k} {_shown(header['settings'].get(k))} there, {_shown(v)} now"
                for k, v in wanted.items()
                if header["settings"].get(k) != v
            )
            raise JournalError(
                f"journal {self.path} was started with other settings: {changed}; "
                "use another --out/--journal or the same settings"
            )
        fresh = not self.path.exists()
        self._file = open(self.path, "ab")
        if self._file.tell() != good_bytes:  # torn last line from a killed run
            self._file.truncate(good_bytes)
            self._file.seek(good_bytes)
        if header is None:
            self._write_line({"kbv3_batch_journal": JOURNAL_FORMAT, "settings": wanted})
            if fresh:
                _fsync_dir(self.path.parent)
        self.existing = records
        return records

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def _take_lock(self) -> None:
        """Lock `<journal>.lock`, a file that exists only while a batch holds it: `close` removes
        it, so a lock taken on a file another batch has just removed is given up and taken again."""
        for _ in range(10):
            lock = open(self.lock_path, "a")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                raise JournalError(f"journal {self.path} is in use by another running batch") from None
            try:
                same = os.stat(self.lock_path).st_ino == os.fstat(lock.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self._lock = lock
                return
            lock.close()  # removed by the batch that held it before: lock the new file instead
        raise JournalError(f"journal {self.path}: could not take its lock {self.lock_path}")

    def append(self, record: dict[str, Any]) -> None:
        if self._file is None:
            raise RuntimeError("journal is not open")
        self._write_line(record)

    def _write_line(self, obj: dict[str, Any]) -> None:
        self._file.write((json.dumps(obj, allow_nan=False) + "\n").encode("utf-8"))
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._lock is not None:
            try:
                os.unlink(self.lock_path)  # while still held: no one can be left locking a removed file
            except OSError:
                pass
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None


def read_journal(path: Path | str) -> tuple[dict[str, Any] | None, list[dict[str, Any]], int]:
    """(header, records, bytes of complete lines). A torn final line is ignored; a corrupt line
    elsewhere is an error naming its line number."""
    path = Path(path)
    if not path.exists():
        return None, [], 0
    data = path.read_bytes()
    header: dict[str, Any] | None = None
    records: list[dict[str, Any]] = []
    good = 0
    lines = data.split(b"\n")
    for number, line in enumerate(lines, start=1):
        last = number == len(lines)
        if last:  # text after the final newline: empty, or a line torn by a kill
            break
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines) - 1 and not data.endswith(b"\n"):
                break
            raise JournalError(f"{path}:{number}: corrupt journal line ({exc})") from None
        if number == 1:
            if not isinstance(obj, dict) or obj.get("kbv3_batch_journal") != JOURNAL_FORMAT:
                raise JournalError(f"{path}:1: not a kbv3 batch journal (header line missing)")
            header = obj
        else:
            records.append(obj)
        good += len(line) + 1
    return header, records, good


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
