"""An episode's transcript: every message, model response, endpoint failure and tool result,
journaled as it happens, and the episode's state read back from it.

Owns the file `RUN_DIR/transcripts/<category>/<problem>.jsonl` (the batch `Journal`: a header
with the settings that change an episode, then one entry a line, each flushed and fsynced before
the next step, a torn last line repaired, one writer at a time) and its entries:

- `message`: a message the episode starts with (system, first user message);
- `reply`: a model response (its text, its tool calls, its `usage`), one turn;
- `failure`: a request that got no response after its retries (a turn that is no model
  response: it is recorded, it counts against no turn limit);
- `tool`: one tool call's answer (for `check`, the check's summary too);
- `nudge`: what the model is told after a response that called no tool;
- `end`: why the episode ended (`submitted`, `turn limit`, `time limit`, `no tool call`,
  `context full`);
- `judged`: the judging's record and which version of `solution.py` it judged.

The transcript is the truth of an episode: `state_of` rebuilds the conversation, the counters,
the tool calls still unanswered and how far it got; `replay` rebuilds the workspace by running
its file changes again, so a resumed episode continues exactly where the journal ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..batch.journal import Journal, read_journal
from .tools import parse_call, run_file_tool
from .workspace import Workspace


class _Header:
    """What the journal's header holds (the batch Journal compares it on resume)."""

    def __init__(self, settings: dict[str, Any]):
        self.settings = settings

    def to_dict(self) -> dict[str, Any]:
        return self.settings


class Transcript:
    """One episode's journal, opened for appending (see the module)."""

    def __init__(self, path: Path | str, header: dict[str, Any]):
        self.path = Path(path)
        self._journal = Journal(self.path, _Header(header))

    def open(self) -> list[dict[str, Any]]:
        """Lock it, check the header (JournalError for other settings); the entries so far."""
        return self._journal.open()

    def append(self, entry: dict[str, Any]) -> dict[str, Any]:
        entry = dict(entry, at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        self._journal.append(entry)
        return entry

    def close(self) -> None:
        self._journal.close()


def read_entries(path: Path | str) -> list[dict[str, Any]]:
    """The entries of a transcript without locking it (a finished run's reader)."""
    return read_journal(path)[1]


@dataclass
class EpisodeState:
    """What an episode's transcript says so far."""

    messages: list[dict[str, Any]] = field(default_factory=list)  # the conversation to send next
    turns: int = 0  # model responses
    failures: int = 0  # requests that got no response
    failures_in_row: int = 0
    nudges_in_row: int = 0  # nudges since the model last called a tool
    usage: dict[str, int] = field(default_factory=dict)  # summed over responses
    elapsed_s: float = 0.0  # the episode's own clock when the last entry was written
    pending: list[dict[str, str]] = field(default_factory=list)  # the last response's unanswered calls
    ended: str | None = None
    judged: dict[str, Any] | None = None

    @property
    def started(self) -> bool:
        return bool(self.messages)

    @property
    def total_tokens(self) -> int:
        return int(self.usage.get("total_tokens", 0))


def assistant_message(entry: dict[str, Any]) -> dict[str, Any]:
    """The assistant message of a `reply` entry, as the next request repeats it."""
    calls = entry.get("tool_calls") or []
    message: dict[str, Any] = {"role": "assistant", "content": entry.get("text") or ("" if not calls else None)}
    if calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls
        ]
    return message


def add_usage(total: dict[str, int], usage: dict[str, Any]) -> None:
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            total[key] = total.get(key, 0) + value
    if "total_tokens" not in usage and ("prompt_tokens" in usage or "completion_tokens" in usage):
        total["total_tokens"] = (
            total.get("total_tokens", 0) + int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
        )


def state_of(entries: list[dict[str, Any]]) -> EpisodeState:
    """Fold the entries into the state (see EpisodeState)."""
    state = EpisodeState()
    for entry in entries:
        fold(state, entry)
    return state


def fold(state: EpisodeState, entry: dict[str, Any]) -> None:
    """Add one entry to `state` (what `state_of` does for each, and a live episode for the new)."""
    kind = entry.get("kind")
    state.elapsed_s = max(state.elapsed_s, float(entry.get("elapsed_s") or 0.0))
    if kind == "message":
        state.messages.append(entry["message"])
    elif kind == "reply":
        state.turns += 1
        state.failures_in_row = 0
        add_usage(state.usage, entry.get("usage") or {})
        state.messages.append(assistant_message(entry))
        state.pending = list(entry.get("tool_calls") or [])
    elif kind == "failure":
        state.failures += 1
        state.failures_in_row += 1
    elif kind == "tool":
        state.nudges_in_row = 0
        state.messages.append({"role": "tool", "tool_call_id": entry["call_id"], "content": entry["result"]})
        state.pending = [c for c in state.pending if c["id"] != entry["call_id"]]
    elif kind == "nudge":
        state.nudges_in_row += 1
        state.messages.append({"role": "user", "content": entry["text"]})
    elif kind == "end":
        state.ended = entry["reason"]
        state.pending = []
    elif kind == "judged":
        state.judged = entry


def replay(workspace: Workspace, entries: list[dict[str, Any]]) -> list[str]:
    """Run the transcript's file changes again on a fresh workspace; returns every text
    `solution.py` held, oldest first (the empty start included)."""
    versions = [workspace.solution()]
    for entry in entries:
        if entry.get("kind") == "tool" and entry.get("changed"):
            raw = {"id": entry["call_id"], "name": entry["name"], "arguments": entry["arguments"]}
            run_file_tool(workspace, parse_call(raw))
            note_version(versions, workspace)
    return versions


def note_version(versions: list[str], workspace: Workspace) -> None:
    """Append `solution.py`'s text when a change made it differ from the last version."""
    text = workspace.solution()
    if text != versions[-1]:
        versions.append(text)
