"""An episode's workspace: the folder the model reads and writes through its tools, and its walls.

Owns what the folder holds (`reference.py`, the problem file byte for byte; `solution.py`, empty
at the start; `README.md`, the rules) and the rule every file tool goes through: a path is
relative, has no `..`, resolves inside the folder, and never names `reference.py` or
`README.md` for writing. A refused path is a `WorkspaceError` whose message is what the model is
told; nothing here raises for what a model asks otherwise.

The folder is rebuilt from the episode's transcript when a run resumes (`transcript` replays
the writes), so the workspace is always what the journaled tool results say it is.
"""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

REFERENCE = "reference.py"
SOLUTION = "solution.py"
README = "README.md"
READ_ONLY = frozenset({REFERENCE, README})

MAX_FILE_BYTES = 1_000_000  # one file the model writes; a kernel source is a few KB
MAX_FILES = 32  # files in the workspace, its own three included
READ_LIMIT_CHARS = 100_000  # what read_file returns of one file (the rest is cut, and it says so)


class WorkspaceError(ValueError):
    """A tool request the workspace refuses; the message is the tool's answer to the model."""


class Workspace:
    """The folder `root`, reached only through paths `resolve` accepts."""

    def __init__(self, root: Path | str):
        self.root = Path(root)

    @classmethod
    def create(cls, root: Path | str, reference: bytes, readme: str) -> Workspace:
        """A fresh workspace at `root` (anything there before is removed); `reference` is the
        problem file's bytes."""
        root = Path(root)
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        (root / REFERENCE).write_bytes(reference)
        (root / README).write_text(readme, encoding="utf-8")
        (root / SOLUTION).write_text("", encoding="utf-8")
        return cls(root)

    # ------------------------------------------------------------------ the walls

    def resolve(self, path: object, *, for_writing: bool = False) -> Path:
        """The file `path` names inside the workspace, or WorkspaceError saying why not."""
        if not isinstance(path, str) or not path.strip():
            raise WorkspaceError("error: `path` must be a file name in the workspace, e.g. solution.py")
        text = path.strip()
        if "\0" in text or "\\" in text:
            raise WorkspaceError(f"error: {text!r} is not a workspace path (no NUL or backslash)")
        pure = PurePosixPath(text)
        if pure.is_absolute() or text.startswith("~"):
            raise WorkspaceError(
                f"error: {text!r} is outside the workspace: paths are relative to it, e.g. solution.py"
            )
        if ".." in pure.parts:
            raise WorkspaceError(f"error: {text!r} leaves the workspace (`..` is not allowed)")
        parts = [p for p in pure.parts if p != "."]
        target = self.root.joinpath(*parts) if parts else self.root
        root = self.root.resolve()
        resolved = target.resolve()
        if resolved != root and root not in resolved.parents:
            raise WorkspaceError(f"error: {text!r} resolves outside the workspace")
        if for_writing:
            name = "/".join(parts)
            if name in READ_ONLY:
                raise WorkspaceError(f"error: {name} is read only; write your solution to {SOLUTION}")
            if not parts or resolved.is_dir():
                raise WorkspaceError(f"error: {text!r} is a folder; name a file, e.g. {SOLUTION}")
        return target

    # ------------------------------------------------------------------ the file tools

    def read(self, path: object) -> str:
        target = self.resolve(path)
        if target.is_dir():
            return "files: " + ", ".join(self.files())
        if not target.is_file():
            raise WorkspaceError(f"error: no file {path!r}; the workspace holds: {', '.join(self.files())}")
        text = target.read_text(encoding="utf-8", errors="replace")
        if len(text) > READ_LIMIT_CHARS:
            return (
                text[:READ_LIMIT_CHARS] + f"\n[... cut: the file has {len(text)} characters, {READ_LIMIT_CHARS} shown]"
            )
        return text

    def write(self, path: object, content: object) -> str:
        target = self.resolve(path, for_writing=True)
        if not isinstance(content, str):
            raise WorkspaceError("error: `content` must be the file's text")
        size = len(content.encode("utf-8"))
        if size > MAX_FILE_BYTES:
            raise WorkspaceError(f"error: {size} bytes is more than a workspace file may hold ({MAX_FILE_BYTES})")
        if not target.exists() and len(self.files()) >= MAX_FILES:
            raise WorkspaceError(f"error: the workspace holds {MAX_FILES} files already; overwrite one instead")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {self.name_of(target)} ({size} bytes, {len(content.splitlines())} lines)"

    def edit(self, path: object, old: object, new: object) -> str:
        target = self.resolve(path, for_writing=True)
        if not isinstance(old, str) or not old:
            raise WorkspaceError("error: `old_str` must be the non-empty text to replace")
        if not isinstance(new, str):
            raise WorkspaceError("error: `new_str` must be text")
        if not target.is_file():
            raise WorkspaceError(f"error: no file {path!r} to edit; write it first with write_file")
        text = target.read_text(encoding="utf-8")
        count = text.count(old)
        if count != 1:
            where = "does not occur" if count == 0 else f"occurs {count} times"
            raise WorkspaceError(f"error: `old_str` {where} in {self.name_of(target)}; it must occur exactly once")
        edited = text.replace(old, new, 1)
        if len(edited.encode("utf-8")) > MAX_FILE_BYTES:
            raise WorkspaceError(f"error: the edit makes the file larger than {MAX_FILE_BYTES} bytes")
        target.write_text(edited, encoding="utf-8")
        line = text[: text.index(old)].count("\n") + 1
        return f"edited {self.name_of(target)} at line {line} ({len(edited.encode('utf-8'))} bytes now)"

    # ------------------------------------------------------------------ reading it back

    def solution(self) -> str:
        path = self.root / SOLUTION
        return path.read_text(encoding="utf-8") if path.is_file() else ""

    def files(self) -> list[str]:
        return sorted(self.name_of(p) for p in self.root.rglob("*") if p.is_file())

    def name_of(self, target: Path) -> str:
        return target.relative_to(self.root).as_posix()
