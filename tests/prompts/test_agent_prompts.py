"""The agent's prompts (`prompts.agent`) state the same rules as the one-shot prompt, from the same
template parts, and the parts are shared without being prompts of their own."""

from __future__ import annotations

import pytest

from kernelbench_v3.catalog.problem import get_problem
from kernelbench_v3.prompts import bundled_templates, to_messages
from kernelbench_v3.prompts.agent import AgentFacts, ToolText, agent_messages, workspace_readme

FACTS = AgentFacts((ToolText("check()", "checks it."),), (0, 1), 40, 300.0, "cpu")


def section(text: str, title: str) -> str:
    """The section whose heading starts with `title`, from its heading to the next one."""
    rest = text.split(f"## {title}", 1)[1]
    return f"## {title}" + rest.split("\n## ", 1)[0]


@pytest.mark.parametrize(
    "problem_id, split",
    [
        ("level1/23_Softmax", "h100"),
        ("tile_specialized/gemm_bf16", "b200"),
    ],
)
def test_the_agent_states_the_one_shot_prompts_rules_and_score_word_for_word(problem_id, split):
    problem = get_problem(problem_id)
    one_shot = to_messages(problem, split)[-1]["content"]
    agent = agent_messages(problem, split, FACTS)[-1]["content"]
    readme = workspace_readme(problem, split, FACTS)
    for title in ("Rules (checked by the evaluator", "Score", "Reference program", "Allowed toolchains"):
        assert section(agent, title) == section(one_shot, title), title
    for title in ("Rules (checked by the evaluator", "Score"):
        assert section(readme, title) == section(one_shot, title), title
    assert f"# Task: {problem_id}" in agent and problem.source.strip() in agent


def test_the_agent_prompt_names_the_tools_seeds_limits_and_device():
    text = agent_messages(get_problem("level1/23_Softmax"), "h100", FACTS)[-1]["content"]
    assert "- `check()`: checks it." in text
    assert "public seeds 0, 1 at reduced sizes, on the CPU" in text
    assert "40 model responses and 300 s" in text
    cuda = AgentFacts(FACTS.tools, (0, 1), 12, 600.0, "cuda")
    text = agent_messages(get_problem("level1/23_Softmax"), "h100", cuda)[-1]["content"]
    assert (
        "at the problem's sizes, then a short timing with its speedup" in text
        and "12 model responses and 600 s" in text
    )


def test_the_parts_are_no_templates_of_their_own_but_any_template_may_include_them(tmp_path):
    assert bundled_templates() == ["default"]
    mine = tmp_path / "mine.j2"
    mine.write_text('{% block user %}Task {{ problem.problem_id }}\n\n{% include "_rules.j2" %}{% endblock %}')
    text = to_messages(get_problem("level1/23_Softmax"), "h100", mine)[-1]["content"]
    assert text.startswith("Task level1/23_Softmax\n\n## Rules (checked by the evaluator")
