"""A scripted fake agent for `tests.generate.fake_openai.FakeOpenAI(agent=...)`: it plays the
episode the issue describes, one tool call per response, and keeps what each tool answered it.

    read_file(reference.py) -> write_file(solution.py, broken) -> check() -> write_file(solution.py,
    good) -> check() -> submit()

It decides its next step from the conversation it is sent (the number of assistant messages so
far), as a model would, so a resumed episode that repeats the transcript gets the same next step.
"""

from __future__ import annotations

import json


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": json.dumps(arguments)}


class ScriptedAgent:
    def __init__(self, broken: str, good: str):
        self.steps = [
            call("read_file", path="reference.py"),
            call("write_file", path="solution.py", content=broken),
            call("check"),
            call("write_file", path="solution.py", content=good),
            call("check"),
            call("submit"),
        ]
        self.seen: list[str] = []  # the tool answer each response followed, in order

    def __call__(self, body: dict) -> dict:
        messages = body["messages"]
        done = sum(1 for m in messages if m["role"] == "assistant")
        if messages[-1]["role"] == "tool":
            self.seen.append(messages[-1]["content"])
        if done >= len(self.steps):
            return {"content": "I have submitted."}
        return {"content": f"step {done + 1}", "tool_calls": [self.steps[done]]}

    def answer_to(self, step: int) -> str:
        """What the tool of `step` (0-based) answered, as the next request carried it."""
        return self.seen[step]
