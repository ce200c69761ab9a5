"""Prompts for model evaluators: one problem on one GPU split -> a prompt (text or chat messages).

A prompt states the full reference source, the target GPU's facts, the rules the evaluator
enforces, the toolchains allowed for that GPU and category, the output format and how the
score is computed. Templates are Jinja2 data files (`prompts/templates/*.j2`); pass a path to
use your own. `context.py` gathers the facts, `render.py` renders templates, `jsonl.py` writes
the per-split prompt files harnesses read.

    from kernelbench_v3.catalog import get_problem
    from kernelbench_v3.prompts import render, to_messages
    text = render(get_problem("level1/40_LayerNorm"), "h100")
    messages = to_messages(get_problem("level1/40_LayerNorm"), "h100", one_shot=True)
"""

from .context import DEFAULT_ATOL, DEFAULT_RTOL, TOOLCHAINS, build_context, toolchains_for
from .jsonl import ROW_FIELDS, prompt_row, prompt_rows, write_jsonl
from .render import (
    DEFAULT_TEMPLATE,
    TEMPLATES_DIR,
    TemplateError,
    bundled_templates,
    load_template,
    messages_to_text,
    render,
    to_messages,
)

__all__ = [
    "DEFAULT_ATOL",
    "DEFAULT_RTOL",
    "DEFAULT_TEMPLATE",
    "ROW_FIELDS",
    "TEMPLATES_DIR",
    "TOOLCHAINS",
    "TemplateError",
    "build_context",
    "bundled_templates",
    "load_template",
    "messages_to_text",
    "prompt_row",
    "prompt_rows",
    "render",
    "to_messages",
    "toolchains_for",
    "write_jsonl",
]
