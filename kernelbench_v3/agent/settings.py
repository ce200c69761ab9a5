"""What an agent run asks for, and the defaults it takes from the published harness.

Owns `AgentSettings` (the split, the model, the device, the turn and time limits, sampling, the
problems, the prices) and which of them a transcript's header holds: those that change what an
episode does (a rerun under other ones is refused, naming the field). The prices only price the
tokens already spent, so they may change between runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI reads this module's defaults to build its parser: it stays light
    from ..catalog.problem import Problem
    from ..generate.client import RequestParams

# The published harness's time limit per level (seconds); levels above 4 take level 4's.
LEVEL_TIME_LIMIT_S: dict[int, float] = {1: 300.0, 2: 600.0, 3: 900.0, 4: 1200.0}
DEFAULT_MAX_TURNS = 40
DEFAULT_MAX_TOKENS = 8192


class AgentError(ValueError):
    """A run that cannot start or finish its results: an unknown problem, transcripts of other
    settings, one in use, a damaged prices.json. The message names the file or the flag."""


@dataclass(frozen=True)
class AgentSettings:
    """One agent run. `problems` empty: the whole split; `time_limit_s` None: per level."""

    split: str
    model: str
    device: str = "cuda"
    max_turns: int = DEFAULT_MAX_TURNS
    time_limit_s: float | None = None
    temperature: float = 0.0
    max_tokens: int = DEFAULT_MAX_TOKENS
    problems: tuple[str, ...] = ()
    problems_root: str | None = None
    price_in: float | None = None  # USD per million prompt tokens
    price_out: float | None = None  # USD per million completion tokens

    @property
    def params(self) -> RequestParams:
        from ..generate.client import RequestParams

        return RequestParams(model=self.model, temperature=self.temperature, max_tokens=self.max_tokens)

    def time_limit_for(self, problem: Problem) -> float:
        if self.time_limit_s is not None:
            return self.time_limit_s
        return LEVEL_TIME_LIMIT_S.get(problem.level, LEVEL_TIME_LIMIT_S[max(LEVEL_TIME_LIMIT_S)])

    def cost_usd(self, usage: dict[str, int]) -> float | None:
        """What the tokens cost at the given prices; None without both prices."""
        if self.price_in is None or self.price_out is None:
            return None
        spent = usage.get("prompt_tokens", 0) * self.price_in + usage.get("completion_tokens", 0) * self.price_out
        return round(spent / 1e6, 6)

    def header(self, problem: Problem) -> dict:
        """A transcript's header: what changes this episode (see the module)."""
        from ..prompts.agent import agent_templates_digest
        from .check import CHECK_TIMING_S, PUBLIC_SEEDS
        from .tools import TOOLS_VERSION

        return {
            "kind": "agent",
            "split": self.split,
            "model": self.model,
            "device": self.device,
            "max_turns": self.max_turns,
            "time_limit_s": self.time_limit_for(problem),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "problem_id": problem.problem_id,
            "problem_sha256": problem.sha256,
            "templates_sha256": agent_templates_digest(),
            "tools_version": TOOLS_VERSION,
            "check": {"seeds": list(PUBLIC_SEEDS), "timing_s": CHECK_TIMING_S},
        }
