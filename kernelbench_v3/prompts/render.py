"""Rendering prompts from Jinja2 templates: text for completion models, messages for chat models.

Owns template resolution (a bundled name such as "default", or a path to the user's own file;
every template can include the bundled parts, `_rules.j2` and `_score.j2`),
the Jinja2 environment (StrictUndefined, so a misspelt variable is an error, not an empty
string), and the split of a template into a system and a user message: a template defines the
blocks `system` and `user`; one without them is rendered whole as a single user message.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from ..catalog.problem import Problem
from .context import build_context, one_shot_example

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
DEFAULT_TEMPLATE = "default"


class TemplateError(ValueError):
    """A template that cannot be found or rendered; the message names the template."""


def bundled_templates() -> list[str]:
    """The names `--template` takes; `_*.j2` are the parts they include (`_rules.j2`), not prompts."""
    return sorted(p.stem for p in TEMPLATES_DIR.glob("*.j2") if not p.name.startswith("_"))


def template_path(template: str | Path) -> Path:
    """A bundled template's name ("default") or a path to a template file -> its path."""
    if isinstance(template, str) and template in bundled_templates():
        return TEMPLATES_DIR / f"{template}.j2"
    path = Path(template)
    if path.is_file():
        return path
    raise TemplateError(
        f"template {str(template)!r} is neither a bundled template "
        f"({', '.join(bundled_templates())}) nor an existing file"
    )


def template_digest(template: str | Path) -> str:
    """sha256 of what renders a template: its own text and the bundled parts any template may
    include (`_*.j2`), so a journal started under other rules notices."""
    import hashlib

    digest = hashlib.sha256(template_path(template).read_bytes())
    for part in sorted(TEMPLATES_DIR.glob("_*.j2")):
        digest.update(part.name.encode() + b"\0" + part.read_bytes())
    return digest.hexdigest()


@lru_cache(maxsize=32)
def _load(path: Path, mtime_ns: int) -> jinja2.Template:
    env = jinja2.Environment(
        # The template's own folder first, then the bundled one: any template may include the
        # bundled parts (`{% include "_rules.j2" %}`), so the rules are stated in one place.
        loader=jinja2.FileSystemLoader([str(path.parent), str(TEMPLATES_DIR)]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        autoescape=False,
    )
    try:
        return env.get_template(path.name)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"{path}:{exc.lineno}: template syntax error: {exc.message}") from None


def load_template(template: str | Path = DEFAULT_TEMPLATE) -> jinja2.Template:
    path = template_path(template).resolve()
    return _load(path, path.stat().st_mtime_ns)


def _context(problem: Problem, gpu: str, one_shot: bool) -> dict[str, Any]:
    example = one_shot_example(TEMPLATES_DIR) if one_shot else None
    return build_context(problem, gpu, one_shot=example)


def _render_parts(template: jinja2.Template, context: dict[str, Any]) -> tuple[str | None, str]:
    """(system text or None, user text) of a template under `context`."""
    where = template.filename or template.name
    try:
        if "user" not in template.blocks:
            return None, template.render(context).strip()
        ctx = template.new_context(context)
        user = "".join(template.blocks["user"](ctx)).strip()
        system = None
        if "system" in template.blocks:
            system = "".join(template.blocks["system"](template.new_context(context))).strip()
        return system or None, user
    except jinja2.UndefinedError as exc:
        raise TemplateError(f"{where}: {exc.message} (see prompts/context.py for the variables)") from None
    except jinja2.TemplateError as exc:
        raise TemplateError(f"{where}: {exc}") from None


def to_messages(
    problem: Problem,
    gpu: str,
    template: str | Path = DEFAULT_TEMPLATE,
    one_shot: bool = False,
) -> list[dict[str, str]]:
    """Chat messages for `problem` on the `gpu` split: a system message (when the template has
    one) and a user message."""
    system, user = _render_parts(load_template(template), _context(problem, gpu, one_shot))
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": user})
    return messages


def render(
    problem: Problem,
    gpu: str,
    template: str | Path = DEFAULT_TEMPLATE,
    one_shot: bool = False,
) -> str:
    """The prompt as one text: the system part, a blank line, then the user part."""
    return messages_to_text(to_messages(problem, gpu, template, one_shot))


def messages_to_text(messages: list[dict[str, str]]) -> str:
    return "\n\n".join(m["content"] for m in messages) + "\n"
