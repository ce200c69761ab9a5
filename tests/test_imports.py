"""The package's import structure, read from the source with `ast` (nothing is imported).

Every `import` inside kernelbench_v3/, at module level or inside a function, is an arrow from the
importing module to the imported one. The arrows must form no cycle, and a few must never exist:
the command line sits on top of everything, and the evaluator sits below the batch, analysis and
dataset machinery that drive it. docs/architecture.md draws the same graph in words.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "kernelbench_v3"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

# Modules nobody but the command line itself may import.
CLI_MODULES = {f"{PACKAGE}.cli", f"{PACKAGE}.cli_args"}
CLI_IMPORTERS = {f"{PACKAGE}.cli", f"{PACKAGE}.__main__"}
# What the evaluator (kernelbench_v3.evaluate and its submodules) must not import.
EVALUATE_FORBIDDEN = [
    f"{PACKAGE}.{name}"
    for name in ("runs", "analysis", "plots", "batch", "executors", "hub", "hub_card", "prompts", "demo")
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The innermost package module `name` refers to (a module, or the module holding an attribute)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package modules `name` imports anywhere in its source."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            # `from pkg import sub` imports the submodule; `from mod import attr` imports mod.
            targets = [f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in known else stem for alias in node.names]
        else:
            continue
        for target in targets:
            if target == PACKAGE or target.startswith(PACKAGE + "."):
                resolved = _resolve(target, known)
                if resolved and resolved != name:
                    found.add(resolved)
    return found


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path (first module repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_graph_sees_the_package():
    graph = import_graph()
    assert f"{PACKAGE}.evaluate.supervisor" in graph
    assert f"{PACKAGE}.catalog" in graph[f"{PACKAGE}.batch"]  # module level
    assert f"{PACKAGE}.evaluate" in graph[f"{PACKAGE}.executors"]  # inside a function


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_only_the_command_line_imports_the_command_line():
    offenders = [
        f"{name} -> {target}"
        for name, targets in import_graph().items()
        for target in sorted(targets & CLI_MODULES)
        if name not in CLI_IMPORTERS
    ]
    assert not offenders, "imports of the command line from outside it: " + ", ".join(offenders)


def test_the_evaluator_imports_nothing_above_it():
    offenders = [
        f"{name} -> {target}"
        for name, targets in import_graph().items()
        if name == f"{PACKAGE}.evaluate" or name.startswith(f"{PACKAGE}.evaluate.")
        for target in sorted(targets)
        if any(target == bad or target.startswith(bad + ".") for bad in EVALUATE_FORBIDDEN)
    ]
    assert not offenders, "the evaluator imports from above it: " + ", ".join(offenders)


def test_find_cycle_reports_the_path():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
