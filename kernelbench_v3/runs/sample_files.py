"""The samples layout: several solutions per problem from one model, as `kbv3 generate` writes
them and `kbv3 eval-batch` reads them.

```
SOLUTIONS/
  samples.json                      # the manifest: model, split, every sample (with or without a file)
  level1/23_Softmax/sample_0.py     # one file per sample that has a solution
  level1/23_Softmax/sample_1.py
```

The manifest is the whole truth of the folder: a sample whose response held no code (or whose
request failed) is listed with `file: null` and a reason, so it counts as a sample without a
solution instead of vanishing from pass@k. Reading it checks every field and names the file,
the row and the field of a defect.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..paths import write_atomically

MANIFEST = "samples.json"
MANIFEST_FORMAT = 1


class SampleManifestError(ValueError):
    """A samples.json that cannot be used; the message names the file, the row and the field."""


@dataclass(frozen=True)
class SampleEntry:
    """One sample: its problem, its index, its solution file (relative to the folder) or None
    and, without a file, why."""

    problem_id: str
    sample: int
    file: str | None
    reason: str = ""


def sample_file(problem_id: str, sample: int) -> str:
    """`level1/23_Softmax`, 1 -> `level1/23_Softmax/sample_1.py` (relative to the folder)."""
    return f"{problem_id}/sample_{sample}.py"


def write_manifest(folder: Path | str, model: str, split: str, entries: list[SampleEntry]) -> Path:
    """Write `folder/samples.json` atomically (sorted by problem, then sample)."""
    path = Path(folder) / MANIFEST
    rows = [
        {"problem_id": e.problem_id, "sample": e.sample, "file": e.file, "reason": e.reason}
        for e in sorted(entries, key=lambda e: (e.problem_id, e.sample))
    ]
    data = {"format": MANIFEST_FORMAT, "model": model, "split": split, "samples": rows}
    write_atomically(path, json.dumps(data, indent=1) + "\n")
    return path


@dataclass(frozen=True)
class SampleManifest:
    model: str
    split: str
    entries: list[SampleEntry]


def read_manifest(folder: Path | str) -> SampleManifest:
    """`folder/samples.json`, checked: every row's fields typed, files inside the folder and present."""
    folder = Path(folder)
    path = folder / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise SampleManifestError(f"{path}: cannot be read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise SampleManifestError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise SampleManifestError(f"{path}: expected a JSON object with model, split and samples")
    if data.get("format") != MANIFEST_FORMAT:
        raise SampleManifestError(f"{path}: field 'format' is {data.get('format')!r}, expected {MANIFEST_FORMAT}")
    for name in ("model", "split"):
        if not isinstance(data.get(name), str) or not data[name]:
            raise SampleManifestError(f"{path}: field {name!r} must be a non-empty string")
    if not isinstance(data.get("samples"), list):
        raise SampleManifestError(f"{path}: field 'samples' must be a list")
    entries, seen = [], set()
    for i, row in enumerate(data["samples"]):
        entry = _entry(row, f"{path}: samples[{i}]", folder)
        if (entry.problem_id, entry.sample) in seen:
            raise SampleManifestError(f"{path}: samples[{i}]: {entry.problem_id} sample {entry.sample} is listed twice")
        seen.add((entry.problem_id, entry.sample))
        entries.append(entry)
    return SampleManifest(model=data["model"], split=data["split"], entries=entries)


def _entry(row: Any, where: str, folder: Path) -> SampleEntry:
    if not isinstance(row, dict):
        raise SampleManifestError(f"{where}: expected an object with problem_id, sample, file, reason")
    problem_id, sample, file, reason = row.get("problem_id"), row.get("sample"), row.get("file"), row.get("reason", "")
    if not isinstance(problem_id, str) or "/" not in problem_id:
        raise SampleManifestError(f"{where}: field 'problem_id' must be a catalog id like level1/23_Softmax")
    if not isinstance(sample, int) or isinstance(sample, bool) or sample < 0:
        raise SampleManifestError(f"{where}: field 'sample' must be a whole number >= 0, got {sample!r}")
    if not isinstance(reason, str):
        raise SampleManifestError(f"{where}: field 'reason' must be a string")
    if file is not None:
        if not isinstance(file, str) or Path(file).is_absolute() or ".." in Path(file).parts:
            raise SampleManifestError(f"{where}: field 'file' must be a path inside {folder} or null")
        if not (folder / file).is_file():
            raise SampleManifestError(f"{where}: field 'file': {folder / file} does not exist")
    elif not reason:
        raise SampleManifestError(f"{where}: a sample without a file needs a 'reason'")
    return SampleEntry(problem_id=problem_id, sample=sample, file=file, reason=reason)
