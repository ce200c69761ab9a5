"""One episode: a model works on one problem over turns, then its solution is judged.

Owns the loop. Each turn sends the conversation with the tools offered; a response's tool calls
are answered in order (file tools in the workspace, `check()` at the desk, `submit()` ends the
episode); a response that calls no tool is answered with a nudge. Before each request the turn
limit (model responses) and the time limit (the episode's own clock: its requests and its
tools' work, not the time it waited for the desk or the time between two runs) are checked, and
a request may take no longer than the time left. A second response in a row that calls no tool
ends the episode (the model has stopped working; the first one is answered with a nudge). An
ended episode is judged (`judge`), and its judging is the last entry of its transcript.

A request that gets no response after its retries is a `failure` entry: recorded, counted
against no limit, and sent again; `MAX_FAILURES_IN_ROW` of them in a row stop the episode
unjudged (a rerun continues it). An endpoint that refuses every request of the run (no tool
calling, a refused key, no such model or endpoint) stops the run with one line
(`EndpointRefused`), since every episode would fail the same way; a conversation that no longer
fits the model's context ends the episode (`context full`), judged as at a limit.

Everything happens through the transcript: each step is journaled before the next one, and a
resumed episode starts from what its transcript says (`transcript.state_of`, `replay`).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..catalog.problem import Problem
from ..generate.client import ChatClient, Reply
from ..prompts.agent import AgentFacts, agent_messages, workspace_readme
from ..vocab import RUNS_GPU_OF_SPLIT
from .check import PUBLIC_SEEDS, CheckSettings, EvaluateFn, run_check, sha256_text
from .desk import Desk, DeskClosed
from .judge import JudgeFn, JudgeSettings, judge_episode
from .layout import RunLayout
from .settings import AgentSettings
from .tools import CHECK, SUBMIT, TOOL_SPECS, TOOL_TEXTS, changes_files, parse_call, run_file_tool
from .transcript import EpisodeState, Transcript, fold, note_version, replay, state_of
from .workspace import Workspace

MAX_FAILURES_IN_ROW = 3
NUDGE = (
    "Your response called no tool. Work through the tools: write solution.py with write_file or "
    "edit_file, run check(), and call submit() when it is done."
)


class EndpointRefused(RuntimeError):
    """The endpoint refuses every request of this run; the message is the run's one line."""


@dataclass
class EpisodeContext:
    """What every episode of a run shares."""

    settings: AgentSettings
    layout: RunLayout
    client: ChatClient
    desk: Desk
    stop: threading.Event = field(default_factory=threading.Event)
    clock: Callable[[], float] = time.monotonic
    evaluate_fn: EvaluateFn | None = None  # the check's evaluator (tests inject one)
    judge_fn: JudgeFn | None = None  # the judge's evaluation of one item (tests inject one)

    def facts(self, problem: Problem) -> AgentFacts:
        return AgentFacts(
            tools=TOOL_TEXTS,
            public_seeds=PUBLIC_SEEDS,
            max_turns=self.settings.max_turns,
            time_limit_s=self.settings.time_limit_for(problem),
            device=self.settings.device,
        )


@dataclass
class EpisodeOutcome:
    problem_id: str
    status: str  # "judged", "already judged", "stopped", "endpoint failing"
    turns: int
    tokens: int
    judged: dict[str, Any] | None = None
    detail: str = ""


class _Clock:
    """The episode's own seconds: those of earlier runs plus this run's, less the desk waits."""

    def __init__(self, start_s: float, clock: Callable[[], float]):
        self._start_s, self._clock, self._t0, self._paused = start_s, clock, clock(), 0.0

    def elapsed(self) -> float:
        return round(self._start_s + (self._clock() - self._t0) - self._paused, 3)

    def pause(self, seconds: float) -> None:
        self._paused += max(0.0, seconds)


def refusal(reply: Reply) -> str:
    """Why no request of this run can succeed ("" when a retry or another episode might): the
    endpoint takes no tool calls, refuses the key, or has no such model or endpoint."""
    status, reason = reply.http_status, reply.reason
    if status in (400, 404, 422, 501) and re.search(r"tool|function", reason, re.I):
        return (
            f"the endpoint does not accept tool calls ({reason}); serve the model with function calling on "
            "(vLLM: --enable-auto-tool-choice --tool-call-parser NAME; SGLang: --tool-call-parser NAME), "
            "or use `kbv3 generate`, which needs no tools"
        )
    if status in (401, 403):
        return f"the endpoint refused the request ({reason}); check the key in the variable --api-key-env names"
    if status == 404:
        return f"the endpoint answered {reason}; check --base-url (the API root, e.g. http://127.0.0.1:8000/v1) and --model"
    return ""


def context_full(reply: Reply) -> bool:
    """A 400 saying the conversation is longer than the model's context: no retry can help."""
    return reply.http_status == 400 and re.search(r"context|too long|maximum.*tokens", reply.reason, re.I) is not None


def run_episode(ctx: EpisodeContext, problem: Problem) -> EpisodeOutcome:
    """Run (or continue, or only report) the episode of `problem`; see the module."""
    transcript = Transcript(ctx.layout.transcript(problem.problem_id), ctx.settings.header(problem))
    entries = transcript.open()
    try:
        state = state_of(entries)
        if state.judged is not None:
            return EpisodeOutcome(problem.problem_id, "already judged", state.turns, state.total_tokens, state.judged)
        facts = ctx.facts(problem)
        workspace = Workspace.create(
            ctx.layout.workspace(problem.problem_id),
            problem.path.read_bytes(),
            workspace_readme(problem, ctx.settings.split, facts),
        )
        versions = replay(workspace, entries)
        episode = _Episode(ctx, problem, transcript, state, workspace, versions, _Clock(state.elapsed_s, ctx.clock))
        if not state.started:
            for message in agent_messages(problem, ctx.settings.split, facts):
                episode.record({"kind": "message", "message": message})
        try:
            return episode.run()
        except DeskClosed:
            return episode.outcome("stopped", "the run stopped")
    finally:
        transcript.close()


class _Episode:
    def __init__(self, ctx, problem, transcript, state: EpisodeState, workspace, versions, clock: _Clock):
        self.ctx, self.problem, self.transcript = ctx, problem, transcript
        self.state, self.workspace, self.versions, self.clock = state, workspace, versions, clock
        self.pid = problem.problem_id
        self.limit_s = ctx.settings.time_limit_for(problem)

    def record(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Journal `entry` (with the episode's clock), then fold it into the state."""
        entry = self.transcript.append(dict(entry, elapsed_s=self.clock.elapsed()))
        fold(self.state, entry)
        return entry

    def outcome(self, status: str, detail: str = "", judged: dict[str, Any] | None = None) -> EpisodeOutcome:
        return EpisodeOutcome(self.pid, status, self.state.turns, self.state.total_tokens, judged, detail)

    def run(self) -> EpisodeOutcome:
        if self.state.ended is None:
            stopped = self.converse()
            if stopped is not None:
                return stopped
        return self.judge()

    def converse(self) -> EpisodeOutcome | None:
        settings, limit_s = self.ctx.settings, self.limit_s
        self.answer(self.state.pending)  # calls an interrupted run left unanswered
        while self.state.ended is None:
            if self.ctx.stop.is_set():
                return self.outcome("stopped", "interrupted")
            if self.state.turns >= settings.max_turns:
                self.end("turn limit")
                break
            if self.clock.elapsed() >= limit_s:
                self.end("time limit")
                break
            remaining_s = limit_s - self.clock.elapsed()  # a response after the limit would not count
            reply = self.ctx.client.complete(self.state.messages, settings.params, TOOL_SPECS, timeout_s=remaining_s)
            if reply.status == "error":
                self.record(
                    {"kind": "failure", "reason": reply.reason, "http_status": reply.http_status,
                     "attempts": reply.attempts, "latency_s": reply.latency_s}
                )  # fmt: skip
                if refusal(reply):
                    raise EndpointRefused(refusal(reply))
                if context_full(reply):
                    self.end("context full")
                    break
                if self.state.failures_in_row >= MAX_FAILURES_IN_ROW:
                    return self.outcome("endpoint failing", reply.reason)
                continue
            self.record(
                {"kind": "reply", "status": reply.status, "text": reply.text, "tool_calls": reply.tool_calls,
                 "finish_reason": reply.finish_reason, "usage": reply.usage, "latency_s": reply.latency_s,
                 "attempts": reply.attempts, "reason": reply.reason}
            )  # fmt: skip
            if reply.tool_calls:
                self.answer(reply.tool_calls)
            elif self.state.nudges_in_row:
                self.end("no tool call")  # told once already: the model has stopped working
            else:
                self.record({"kind": "nudge", "text": NUDGE})
        return None

    def answer(self, calls: list[dict[str, str]]) -> None:
        for raw in list(calls):
            if self.state.ended is not None:
                return  # after submit(): the episode is over
            call = parse_call(raw)
            entry: dict[str, Any] = {"kind": "tool", "call_id": raw["id"], "name": raw["name"]}
            entry["arguments"] = raw.get("arguments", "")
            if call.name == CHECK and not call.error and self.clock.elapsed() >= self.limit_s:
                self.record(dict(entry, result="not run: the episode's time limit is reached"))
                self.end("time limit")
            elif call.name == CHECK and not call.error:
                result, summary = self.check()
                self.record(dict(entry, result=result, check=summary))
            elif call.name == SUBMIT and not call.error:
                text = self.workspace.solution()
                result = (
                    f"submitted solution.py ({len(text.encode('utf-8'))} bytes); it is judged now, the episode is over"
                )
                self.record(dict(entry, result=result))
                self.end("submitted")
            elif call.name in (CHECK, SUBMIT):
                self.record(dict(entry, result=call.error))
            else:
                result = run_file_tool(self.workspace, call)
                changed = changes_files(call, result)
                self.record(dict(entry, result=result, changed=changed))
                if changed:
                    note_version(self.versions, self.workspace)

    def check(self) -> tuple[str, dict[str, Any]]:
        settings = self.ctx.settings
        check_settings = CheckSettings(settings.split, settings.device, settings.problems_root, settings.model)
        text = self.workspace.solution()
        versions = self.ctx.layout.versions(self.pid)

        def job():
            try:
                return run_check(self.pid, text, versions, check_settings, self.ctx.evaluate_fn)
            except Exception as exc:  # noqa: BLE001 - a check that cannot run is an answer, not a crash
                return f"error: the check could not run: {type(exc).__name__}: {exc}", {"error": str(exc)}

        (result, summary), waited = self.ctx.desk.run(job)
        self.clock.pause(waited)
        return result, summary

    def end(self, reason: str) -> None:
        self.record({"kind": "end", "reason": reason, "solution_sha256": sha256_text(self.workspace.solution())})

    def judge(self) -> EpisodeOutcome:
        settings = self.ctx.settings
        judge_settings = JudgeSettings(settings.split, settings.device, settings.model, settings.problems_root)
        newest_first = list(dict.fromkeys(reversed(self.versions)))
        gpu = RUNS_GPU_OF_SPLIT[settings.split]  # type: ignore[index]
        submitted = self.state.ended == "submitted"

        def job():
            return judge_episode(
                self.pid, gpu, newest_first, submitted, self.ctx.layout.versions(self.pid), judge_settings,
                self.ctx.judge_fn,
            )  # fmt: skip

        judged, _ = self.ctx.desk.run(job)
        entry = self.record(
            {"kind": "judged", "ended": self.state.ended, "solution_sha256": judged.solution_sha256,
             "tried": judged.tried, "record": judged.record}
        )  # fmt: skip
        return self.outcome("judged", self.state.ended or "", entry)
