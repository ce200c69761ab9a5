"""The texts an agent episode starts from: its first messages and its workspace's README.md.

Owns `AgentFacts` (what an agent prompt states beyond a one-shot prompt: the tools, the public
seeds of `check()`, the turn and time limits, the device the evaluations run on) and rendering
the two bundled templates, `templates/agent/task.j2` (system and first user message) and
`templates/agent/workspace.j2` (README.md). Both include the same rule and score parts as
`default.j2`, so an agent reads exactly the rules a one-shot prompt states.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..catalog.problem import Problem
from .context import build_context
from .render import TEMPLATES_DIR, _render_parts, load_template, template_digest

TASK_TEMPLATE = TEMPLATES_DIR / "agent" / "task.j2"
WORKSPACE_TEMPLATE = TEMPLATES_DIR / "agent" / "workspace.j2"


@dataclass(frozen=True)
class ToolText:
    """How a prompt names one tool: `read_file(path)` and what it does."""

    signature: str
    what: str


@dataclass(frozen=True)
class AgentFacts:
    tools: tuple[ToolText, ...]
    public_seeds: tuple[int, ...]
    max_turns: int
    time_limit_s: float
    device: str  # "cuda" | "cpu": what check() can report (no time on the CPU)

    def context(self) -> dict[str, Any]:
        facts = asdict(self)
        facts["tools"] = [asdict(t) for t in self.tools]
        return facts


def _context(problem: Problem, split: str, facts: AgentFacts) -> dict[str, Any]:
    context = build_context(problem, split)
    context["agent"] = facts.context()
    return context


def agent_messages(
    problem: Problem, split: str, facts: AgentFacts, template: Path = TASK_TEMPLATE
) -> list[dict[str, str]]:
    """The system message and the first user message of an episode on `problem`."""
    system, user = _render_parts(load_template(template), _context(problem, split, facts))
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": user})
    return messages


def workspace_readme(problem: Problem, split: str, facts: AgentFacts) -> str:
    """The workspace's README.md: the files, the tools, the limits and the rules."""
    _, text = _render_parts(load_template(WORKSPACE_TEMPLATE), _context(problem, split, facts))
    return text + "\n"


def agent_templates_digest() -> str:
    """sha256 of the agent templates and the parts they include (an episode journal's setting)."""
    both = template_digest(TASK_TEMPLATE) + template_digest(WORKSPACE_TEMPLATE)
    return hashlib.sha256(both.encode()).hexdigest()
