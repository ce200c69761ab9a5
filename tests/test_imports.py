"""The package's import structure, read from the source with `ast` (nothing is imported).

Every `import` inside kernelbench_v3/, at module level or inside a function, is an arrow from the
importing module to the imported one. The arrows must form no cycle, and between wings
(sub-packages) they may only point the ways ALLOWED_ARROWS lists: the command line on top, the
evaluator below the batch, analysis and dataset machinery that drive it. docs/architecture.md draws the same graph in words.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from tests.paths import PACKAGE as ROOT

PACKAGE = ROOT.name  # "kernelbench_v3"

# The wings and the arrows allowed between them (docs/architecture.md draws the same picture).
# A wing is the first name below the package: a sub-package, or a top-level module. An arrow not
# listed here fails the test, so a new dependency between wings is a decision, not an accident.
SHARED = {"vocab", "paths", "hub_reach", "syntax"}  # the leaves every wing may use
ALLOWED_ARROWS: dict[str, set[str]] = {
    "vocab": set(),
    "paths": set(),
    "hub_reach": set(),
    "syntax": set(),
    "catalog": SHARED,
    "hardware": SHARED | {"catalog"},
    "evaluate": SHARED | {"catalog", "hardware"},
    "prompts": SHARED | {"catalog", "hardware", "evaluate"},  # a prompt states the evaluator's rules
    "dataset": SHARED | {"catalog", "hardware", "prompts"},
    "runs": SHARED | {"catalog", "hardware"},
    "workers": SHARED | {"evaluate"},  # a long-lived evaluation worker's life: watchdog, warm-up
    "batch": SHARED | {"catalog", "evaluate", "runs", "workers"},  # runs: solution files in the runs layout
    "serve": SHARED | {"catalog", "evaluate", "workers"},  # the local service: warm supervisors behind a socket
    # prompts -> model -> samples: the batch journal's durability, runs' samples layout
    "generate": SHARED | {"catalog", "prompts", "batch", "runs"},
    # the agent loop: the model through generate's client, the rules from prompts, checks through
    # evaluate's public API, judging as eval-batch does (batch), results in the runs layouts
    "agent": SHARED | {"catalog", "prompts", "evaluate", "batch", "runs", "generate"},
    "cli": SHARED
    | {
        "<package>",
        "catalog",
        "hardware",
        "evaluate",
        "prompts",
        "dataset",
        "runs",
        "batch",
        "serve",
        "generate",
        "agent",
    },
    "<package>": SHARED | {"catalog", "dataset", "evaluate", "runs"},  # the lazy top-level API
    "__main__": {"cli"},
}


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


@functools.cache  # read-only for the tests; parsing every module once is enough per session
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


def wing_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "<package>"


def test_the_graph_sees_the_package():
    graph = import_graph()
    assert f"{PACKAGE}.evaluate.supervisor.run.evaluation" in graph
    assert f"{PACKAGE}.catalog.problem" in graph[f"{PACKAGE}.batch.discover"]  # module level
    assert f"{PACKAGE}.evaluate" in graph[f"{PACKAGE}.batch.executors"]  # inside a function


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_every_wing_is_known_and_arrows_point_down():
    graph = import_graph()
    unknown = sorted({wing_of(name) for name in graph} - set(ALLOWED_ARROWS))
    assert not unknown, f"wings missing from ALLOWED_ARROWS (and docs/architecture.md): {unknown}"
    offenders = sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        for target in targets
        if wing_of(target) != wing_of(name) and wing_of(target) not in ALLOWED_ARROWS[wing_of(name)]
    )
    assert not offenders, "imports against the direction of the wings: " + ", ".join(offenders)


def test_the_allowed_arrows_have_no_cycle():
    assert find_cycle({wing: arrows - {wing} for wing, arrows in ALLOWED_ARROWS.items()}) is None


def test_every_wing_says_what_it_owns():
    for package in sorted(ROOT.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(package.read_text(encoding="utf-8")))
        assert doc and len(doc) > 40, f"{package}: a wing's docstring says what it owns"


def test_the_forbidden_directions_are_caught():
    graph = {"kernelbench_v3.evaluate.x": {"kernelbench_v3.runs.load"}, "kernelbench_v3.runs.load": set()}
    offenders = [
        (name, target)
        for name, targets in graph.items()
        for target in targets
        if wing_of(target) not in ALLOWED_ARROWS[wing_of(name)]
    ]
    assert offenders == [("kernelbench_v3.evaluate.x", "kernelbench_v3.runs.load")]
    assert "cli" not in set().union(*(arrows for wing, arrows in ALLOWED_ARROWS.items() if wing != "__main__"))


def test_find_cycle_reports_the_path():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


# Inside evaluate/: the trust boundary in the layout. The supervisor side may import the solution
# side only to start it (the zygote); the solution side never imports the supervisor's; the
# protocol between them imports neither.
EVALUATE = f"{PACKAGE}.evaluate"
SIDES = {"supervisor", "solution", "protocol"}
# The supervisor starts solution processes through the zygote, or the warm server that forks one.
MAY_REACH = {
    "supervisor": {"protocol", "solution.zygote", "solution.zygote_server"},
    "solution": {"protocol"},
    "protocol": set(),
}


def side_of(module: str) -> str | None:
    if not module.startswith(EVALUATE + "."):
        return None
    side = module[len(EVALUATE) + 1 :].split(".")[0]
    return side if side in SIDES else None


def test_the_trust_boundary_is_in_the_layout():
    graph = import_graph()
    assert {side_of(m) for m in graph} >= SIDES
    offenders = []
    for name, targets in graph.items():
        side = side_of(name)
        if side is None:
            continue
        for target in targets:
            other = side_of(target)
            if other is None or other == side:
                continue
            inner = target[len(EVALUATE) + 1 :]
            if other not in MAY_REACH[side] and inner not in MAY_REACH[side]:
                offenders.append(f"{name} -> {target}")
    assert not offenders, "imports across the trust boundary: " + ", ".join(sorted(offenders))


def test_shared_evaluator_modules_import_neither_side_but_the_protocol():
    graph = import_graph()
    shared = [m for m in graph if m.startswith(EVALUATE + ".") and side_of(m) is None and m != EVALUATE]
    offenders = [f"{m} -> {t}" for m in shared for t in graph[m] if side_of(t) in ("supervisor", "solution")]
    assert not offenders, "shared evaluator modules reaching into a side: " + ", ".join(sorted(offenders))


# The evaluator's public API is the seam: every other wing imports `kernelbench_v3.evaluate` and
# nothing below it (the names it needs are named there, `evaluate/__init__`).
def test_other_wings_reach_the_evaluator_only_through_its_public_api():
    graph = import_graph()
    offenders = sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        if wing_of(name) != "evaluate"
        for target in targets
        if wing_of(target) == "evaluate" and target != EVALUATE
    )
    assert not offenders, "imports of the evaluator's insides: " + ", ".join(offenders)


# Inside supervisor/: five rooms by what they own, each entered only through its `__init__`, and
# the arrows between them (docs/architecture.md draws the same).
SUPERVISOR = f"{EVALUATE}.supervisor"
ROOM_ARROWS: dict[str, set[str]] = {
    "run": {"reference", "verdict", "timing", "session"},  # one evaluation: uses every room
    "reference": {"verdict", "timing"},  # vetted by the verdict's rules, the baseline timed
    "verdict": {"timing", "session"},  # judges what was timed and what the process said
    "timing": {"session"},  # speaks to a process only through its session
    "session": set(),
}


def room_of(module: str) -> str | None:
    if not module.startswith(SUPERVISOR + "."):
        return None
    return module[len(SUPERVISOR) + 1 :].split(".")[0]


def test_every_supervisor_module_is_in_a_room():
    graph = import_graph()
    loose = sorted(m for m in graph if m.startswith(SUPERVISOR + ".") and room_of(m) not in ROOM_ARROWS)
    assert not loose, f"supervisor modules in no room (ROOM_ARROWS): {loose}"
    assert {room_of(m) for m in graph} >= set(ROOM_ARROWS)


def test_the_rooms_point_down():
    graph = import_graph()
    offenders = sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        if (room := room_of(name)) is not None
        for target in targets
        if (other := room_of(target)) is not None and other != room and other not in ROOM_ARROWS[room]
    )
    assert not offenders, "imports between the supervisor's rooms against their arrows: " + ", ".join(offenders)
    assert find_cycle({room: arrows - {room} for room, arrows in ROOM_ARROWS.items()}) is None


def test_a_room_is_entered_only_through_its_init():
    graph = import_graph()
    offenders = sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        for target in targets
        if (room := room_of(target)) is not None
        and target != f"{SUPERVISOR}.{room}"  # an inner module of the room ...
        and room_of(name) != room  # ... imported from outside it
    )
    assert not offenders, "imports of a room's inner modules from outside it: " + ", ".join(offenders)


def test_the_room_rules_catch_what_they_forbid():
    inner = f"{SUPERVISOR}.timing.measure"
    assert room_of(inner) == "timing" and room_of(f"{SUPERVISOR}.timing") == "timing"
    assert room_of(f"{EVALUATE}.record") is None
    assert "verdict" not in ROOM_ARROWS["timing"] and "run" not in set().union(*ROOM_ARROWS.values())
