"""Pulling the solution file out of a model's response.

Owns one rule: the solution is the **last** fenced Python block of the response that defines
`class Model` (or `class ModelNew`, the name the original KernelBench prompts asked for).
Fences follow CommonMark: ``` or ~~~, three or more, indented at most three spaces; a block
closes at a fence of the same character that is at least as long and carries no info string;
an unclosed block runs to the end of the response. A block counts as Python when its info
string starts with `python`, `py`, `python3` or `py3`, or when it has none.

A line that is only backticks inside the code (say, inside a docstring that shows Markdown)
closes the block early under CommonMark. When a Python block does not parse, it is extended to
later closing fences of the same kind until it does; the first extension that parses wins, so a
string holding a fence neither cuts the solution in half nor opens a bogus block after it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from .. import syntax

PYTHON_LABELS = frozenset({"", "python", "py", "python3", "py3"})
SOLUTION_CLASSES = ("Model", "ModelNew")

_OPEN = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_CLASS = re.compile(r"^class\s+(Model|ModelNew)\b", re.MULTILINE)


class ExtractionError(ValueError):
    """The response holds no usable solution block; the message says what was found instead."""


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block of a response: its language label, text, and 1-based opening line."""

    label: str
    code: str
    line: int
    closed: bool

    @property
    def is_python(self) -> bool:
        return self.label in PYTHON_LABELS


@dataclass(frozen=True)
class Solution:
    """The extracted solution: the file text and where it came from in the response."""

    code: str
    class_name: str  # "Model" or "ModelNew"
    line: int  # 1-based line of the opening fence
    block_count: int  # fenced blocks found in the response, of any language


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return len(line) - len(line.lstrip(" ")) <= 3 and len(stripped) >= len(fence) and set(stripped) == {fence[0]}


def _label(info: str) -> str:
    words = info.strip().lstrip("{").strip(". ").split()
    return words[0].lower().strip("{}.") if words else ""


def code_blocks(text: str) -> list[CodeBlock]:
    """Every fenced block of a Markdown response, in order (see the module docstring for how a
    Python block that does not parse is extended over a fence-looking line)."""
    lines = text.splitlines()
    blocks: list[CodeBlock] = []
    i = 0
    while i < len(lines):
        match = _OPEN.match(lines[i])
        if not match or (match["fence"][0] == "`" and "`" in match["info"]):
            i += 1
            continue
        fence, indent, label = match["fence"], len(match["indent"]), _label(match["info"])
        start = i + 1
        closers = [j for j in range(start, len(lines)) if _closes(lines[j], fence)]
        end = closers[0] if closers else len(lines)
        if label in PYTHON_LABELS and not _parses(_body(lines, start, end, indent)):
            # A fence-looking line inside a string may have closed the block early.
            end = next((j for j in closers[1:] if _parses(_body(lines, start, j, indent))), end)
        blocks.append(
            CodeBlock(label=label, code=_body(lines, start, end, indent), line=i + 1, closed=end < len(lines))
        )
        i = end + 1
    return blocks


def _body(lines: list[str], start: int, end: int, indent: int) -> str:
    # CommonMark removes up to the opening fence's indentation from each content line.
    def dedent(line: str) -> str:
        return line[min(indent, len(line) - len(line.lstrip(" "))) :]

    return "\n".join(dedent(line) for line in lines[start:end])


def _parses(code: str) -> bool:
    try:
        syntax.parse(code)
    except SyntaxError:
        return False
    return True


def _defined_class(code: str) -> str | None:
    """ "Model" if the code defines it at top level, else "ModelNew", else None."""
    try:
        tree = syntax.parse(code)
    except SyntaxError:
        names = set(_CLASS.findall(code))
    else:
        names = {s.name for s in tree.body if isinstance(s, ast.ClassDef)}
    return next((n for n in SOLUTION_CLASSES if n in names), None)


def extract_solution(text: str) -> Solution:
    """The last fenced Python block defining `class Model`/`class ModelNew`, as a Solution.

    Raises ExtractionError saying how many blocks there were and why none qualified.
    """
    blocks = code_blocks(text)
    for block in reversed(blocks):
        name = _defined_class(block.code) if block.is_python else None
        if name is not None:
            return Solution(
                code=block.code.rstrip("\n") + "\n", class_name=name, line=block.line, block_count=len(blocks)
            )
    raise ExtractionError(_why_nothing(blocks))


def _why_nothing(blocks: list[CodeBlock]) -> str:
    if not blocks:
        return (
            "no fenced code block in the response: the solution must be one ```python block "
            "holding the whole file, defining `class Model`"
        )
    python = [b for b in blocks if b.is_python]
    other = sorted({b.label for b in blocks if not b.is_python})
    detail = f"{len(blocks)} fenced block(s), {len(python)} of them Python"
    if other:
        detail += f" (other labels: {', '.join(other)})"
    return f"no fenced Python block defining `class Model` (or `class ModelNew`) in the response: {detail}"


def extract_file(response: Path | str, out: Path | str | None = None) -> Solution:
    """Read a response file, extract its solution and, when `out` is given, write it there."""
    response = Path(response)
    try:
        text = response.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ExtractionError(f"{response}: cannot be read: {exc}") from None
    try:
        solution = extract_solution(text)
    except ExtractionError as exc:
        raise ExtractionError(f"{response}: {exc}") from None
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(solution.code, encoding="utf-8")
    return solution
