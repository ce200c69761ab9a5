"""The tools a model may call in an episode: their OpenAI function schemas, their one-line
descriptions for the prompt, and running the file tools against a workspace.

Owns the tool vocabulary (`read_file`, `write_file`, `edit_file`, `check`, `submit`) and the
parsing of one call (its JSON arguments, unknown tools, missing arguments), whose every mistake
becomes an `error: ...` answer to the model rather than an exception. The file tools run here;
`check` and `submit` reach beyond the workspace (the evaluator, the episode's end), so the
episode runs them (`episode`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..prompts.agent import ToolText
from .workspace import SOLUTION, Workspace, WorkspaceError

TOOLS_VERSION = 1  # journaled: a transcript resumes only under the same tools

FILE_TOOLS = ("read_file", "write_file", "edit_file")
CHECK, SUBMIT = "check", "submit"


def _function(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(properties)},
        },
    }


_TEXT = {"type": "string"}
_DESCRIPTIONS = {
    "read_file": ("read_file(path)", "returns a workspace file's text (`reference.py`, `solution.py`, `README.md`)."),
    "write_file": (
        "write_file(path, content)",
        f"writes `content` as the whole file (`{SOLUTION}`; never `reference.py` or `README.md`).",
    ),
    "edit_file": (
        "edit_file(path, old_str, new_str)",
        "replaces `old_str`, which must occur exactly once in the file, by `new_str`.",
    ),
    CHECK: ("check()", f"runs `{SOLUTION}` through the evaluator on the public seeds and answers in a few lines."),
    SUBMIT: ("submit()", f"ends the episode: `{SOLUTION}` as it is now is judged and scored."),
}

TOOL_SPECS: list[dict[str, Any]] = [
    _function("read_file", _DESCRIPTIONS["read_file"][1], {"path": _TEXT}),
    _function("write_file", _DESCRIPTIONS["write_file"][1], {"path": _TEXT, "content": _TEXT}),
    _function("edit_file", _DESCRIPTIONS["edit_file"][1], {"path": _TEXT, "old_str": _TEXT, "new_str": _TEXT}),
    _function(CHECK, _DESCRIPTIONS[CHECK][1], {}),
    _function(SUBMIT, _DESCRIPTIONS[SUBMIT][1], {}),
]
TOOL_NAMES = tuple(spec["function"]["name"] for spec in TOOL_SPECS)
TOOL_TEXTS = tuple(ToolText(*_DESCRIPTIONS[name]) for name in TOOL_NAMES)


@dataclass(frozen=True)
class Call:
    """One tool call as the model made it: its id, the tool's name and its arguments (decoded),
    or `error`, the answer to give when the call cannot be run as made."""

    id: str
    name: str
    arguments: dict[str, Any]
    error: str = ""


def parse_call(raw: dict[str, str]) -> Call:
    """A call of `Reply.tool_calls` (`{"id", "name", "arguments"}`, arguments as JSON text)."""
    call_id, name, text = raw.get("id", ""), raw.get("name", ""), raw.get("arguments") or ""
    if name not in TOOL_NAMES:
        return Call(call_id, name, {}, f"error: no tool {name!r}; the tools are {', '.join(TOOL_NAMES)}")
    try:
        arguments = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        return Call(call_id, name, {}, f"error: the arguments of {name} are not JSON ({exc.msg} at {exc.pos})")
    if not isinstance(arguments, dict):
        return Call(call_id, name, {}, f"error: the arguments of {name} must be a JSON object")
    spec = next(s["function"] for s in TOOL_SPECS if s["function"]["name"] == name)
    missing = [p for p in spec["parameters"]["required"] if p not in arguments]
    if missing:
        return Call(call_id, name, arguments, f"error: {name} needs {', '.join(missing)}")
    return Call(call_id, name, arguments)


def run_file_tool(workspace: Workspace, call: Call) -> str:
    """The answer of one file tool call (what it did, or `error: ...`); it never raises."""
    if call.error:
        return call.error
    args = call.arguments
    try:
        if call.name == "read_file":
            return workspace.read(args["path"])
        if call.name == "write_file":
            return workspace.write(args["path"], args["content"])
        if call.name == "edit_file":
            return workspace.edit(args["path"], args["old_str"], args["new_str"])
    except WorkspaceError as exc:
        return str(exc)
    except OSError as exc:  # e.g. a name the file system refuses
        return f"error: {exc.strerror or exc}"
    raise ValueError(f"{call.name} is not a file tool")


def changes_files(call: Call, answer: str) -> bool:
    """Whether this call's answer says it changed a file (replayed when the workspace is rebuilt)."""
    return call.name in ("write_file", "edit_file") and not call.error and not answer.startswith("error:")
