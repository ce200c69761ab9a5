"""The problem catalog: discovering problem files and reading their metadata without running them.

Owns the frozen `Problem` dataclass, the GPU split rules (which folders and exclusions make up
`rtx3090`, `h100` and `b200`), and the clear errors for malformed problem files. Problem files
are parsed with `ast`; nothing in them is executed here (see `materialize` for that).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import syntax
from ..vocab import PROBLEM_PRECISIONS, SPLITS

# Split membership is by folder plus an exclude list of bare file names, exactly like the
# published hardware targets. HARDWARE_REQUIRED inside the files is metadata and never selects.
SPLIT_FOLDERS: dict[str, tuple[str, ...]] = {
    "rtx3090": ("level1", "level2", "level3", "level4", "graphics"),
    "h100": ("level1", "level2", "level3", "level4", "tile_specialized"),
    "b200": ("level1", "level2", "level3", "level4", "tile_specialized", "cutile"),
}
SPLIT_EXCLUDES: dict[str, frozenset[str]] = {
    "rtx3090": frozenset({"9_FP4_BlockScaled_Matmul.py"}),
    "h100": frozenset({"9_FP4_BlockScaled_Matmul.py"}),
    "b200": frozenset(),
}
CATEGORIES: tuple[str, ...] = (
    "level1",
    "level2",
    "level3",
    "level4",
    "graphics",
    "tile_specialized",
    "cutile",
)

# Names that may appear in HARDWARE_REQUIRED. "A100" and "M4MAX" appear in the published set
# although no split targets them.
KNOWN_HARDWARE = frozenset({"RTX3090", "A100", "H100", "H200", "B200", "RTX_PRO_6000", "M4MAX"})

# Folders without a level number take it from this module constant when present, else 1 (as
# the published harness does).
LEVEL_CONSTANTS = {
    "graphics": "GRAPHICS_LEVEL",
    "tile_specialized": "SPECIALIZED_LEVEL",
    "cutile": "CUTILE_LEVEL",
}

REQUIRED_CONSTANTS = ("OP_TYPE", "SUPPORTED_PRECISIONS", "HARDWARE_REQUIRED")
REQUIRED_DEFINITIONS = ("Model", "get_inputs", "get_init_inputs")

SizeValue = int | float | bool


class ProblemFileError(ValueError):
    """A problem file that cannot be catalogued; the message names the file and the defect."""

    def __init__(self, path: Path | str, message: str):
        self.path = Path(path)
        self.defect = message
        super().__init__(f"{path}: {message}")


class CatalogError(ValueError):
    """One or more problem files of a folder are malformed; lists every one of them."""

    def __init__(self, errors: list[ProblemFileError]):
        self.errors = errors
        lines = "\n".join(f"  - {e}" for e in errors)
        super().__init__(f"{len(errors)} malformed problem file(s):\n{lines}")


@dataclass(frozen=True)
class Problem:
    """One benchmark problem, as read from its file without running it."""

    problem_id: str  # "<category>/<file stem>", e.g. "level1/40_LayerNorm"
    path: Path
    category: str
    level: int
    op_type: str
    supported_precisions: tuple[str, ...]
    hardware_required: tuple[str, ...]
    gpus: tuple[str, ...]
    size_variables: tuple[tuple[str, SizeValue], ...] = field(default=())
    reduced_sizes: tuple[tuple[str, SizeValue], ...] = field(default=())
    cpu_unsupported: str | None = None
    # Every literal upper-case module constant (CUTILE_REFERENCE_SNIPPET, SPECIALIZED_LEVEL, ...).
    constants: tuple[tuple[str, Any], ...] = field(default=(), repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def file_name(self) -> str:
        return self.path.name

    @property
    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()

    @property
    def sizes(self) -> dict[str, SizeValue]:
        return dict(self.size_variables)

    @property
    def reduced(self) -> dict[str, SizeValue]:
        return dict(self.reduced_sizes)

    def constant(self, name: str, default: Any = None) -> Any:
        return dict(self.constants).get(name, default)


PACKAGE_DIR = Path(__file__).resolve().parents[1]
# Where a wheel carries the problem files (setup.py copies `problems/` there at build time).
BUNDLED_PROBLEMS = PACKAGE_DIR / "_problems"
CHECKOUT_PROBLEMS = PACKAGE_DIR.parent / "problems"


def default_problems_dir() -> Path:
    """`$KBV3_PROBLEMS_DIR`, else the checkout's `problems/` (a source tree or an editable
    install), else the copy shipped inside the installed package (`kernelbench_v3/_problems`)."""
    env = os.environ.get("KBV3_PROBLEMS_DIR")
    if env:
        return Path(env)
    for candidate in (CHECKOUT_PROBLEMS, BUNDLED_PROBLEMS):
        if (candidate / "level1").is_dir():
            return candidate
    raise FileNotFoundError(
        "no problems folder found: set KBV3_PROBLEMS_DIR or pass the folder explicitly "
        f"(looked for {CHECKOUT_PROBLEMS} and {BUNDLED_PROBLEMS}; reinstall the package if the "
        "latter is missing)"
    )


def splits_of(category: str, file_name: str) -> tuple[str, ...]:
    return tuple(
        split for split in SPLITS if category in SPLIT_FOLDERS[split] and file_name not in SPLIT_EXCLUDES[split]
    )


def _literal(node: ast.AST, path: Path, name: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ProblemFileError(path, f"constant {name} must be a plain literal, got `{ast.unparse(node)}`") from None


def _top_level_assignments(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    """(name, value node) for every `name = value` / `a, b = x, y` at module level."""
    pairs: list[tuple[str, ast.AST]] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
            pairs.append((stmt.target.id, stmt.value))
        if not isinstance(stmt, ast.Assign):
            continue
        for target in stmt.targets:
            if isinstance(target, ast.Name):
                pairs.append((target.id, stmt.value))
            elif (
                isinstance(target, ast.Tuple)
                and isinstance(stmt.value, ast.Tuple)
                and len(target.elts) == len(stmt.value.elts)
            ):
                for t, v in zip(target.elts, stmt.value.elts):
                    if isinstance(t, ast.Name):
                        pairs.append((t.id, v))
    return pairs


def size_variables_of(tree: ast.Module) -> dict[str, SizeValue]:
    """Module-level names bound to a plain int/float/bool literal: the overridable sizes."""
    sizes: dict[str, SizeValue] = {}
    for name, value in _top_level_assignments(tree):
        if isinstance(value, ast.Constant) and type(value.value) in (int, float, bool):
            if name not in REQUIRED_CONSTANTS and not name.endswith("_LEVEL"):
                sizes[name] = value.value
        elif (
            isinstance(value, ast.UnaryOp)
            and isinstance(value.op, ast.USub)
            and isinstance(value.operand, ast.Constant)
            and type(value.operand.value) in (int, float)
        ):
            sizes[name] = -value.operand.value
    return sizes


def read_problem(path: Path | str, root: Path | str | None = None) -> Problem:
    """Parse one problem file. Raises ProblemFileError naming the file and the defect."""
    path = Path(path)
    category = path.parent.name if root is None else path.parent.relative_to(root).as_posix()
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemFileError(path, f"cannot be read: {exc}") from None
    return _problem_of(path, category, source)


# Remembered by the file's text: `discover` parses every file of a folder, and a process that
# lives on (`kbv3 serve`, an agent run, the test suite) discovers again and again. A malformed
# file raises each time (an exception is not remembered).
@functools.lru_cache(maxsize=1024)
def _problem_of(path: Path, category: str, source: str) -> Problem:
    try:
        tree = syntax.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ProblemFileError(path, f"syntax error at line {exc.lineno}: {exc.msg}") from None

    defined = {
        stmt.name for stmt in tree.body if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    }
    assigned = dict(_top_level_assignments(tree))
    missing = [n for n in REQUIRED_DEFINITIONS if n not in defined and n not in assigned]
    if missing:
        raise ProblemFileError(path, f"missing required definition(s): {', '.join(missing)}")
    missing = [n for n in REQUIRED_CONSTANTS if n not in assigned]
    if missing:
        raise ProblemFileError(path, f"missing required constant(s): {', '.join(missing)}")

    # Required and project constants must be literals; other upper-case names are metadata
    # when literal and ignored otherwise (a derived size such as `M = batch_size * seq_len`).
    strict = set(REQUIRED_CONSTANTS) | {"REDUCED_SIZES", "CPU_UNSUPPORTED", *LEVEL_CONSTANTS.values()}
    constants: dict[str, Any] = {}
    for name, node in assigned.items():
        if name in strict:
            constants[name] = _literal(node, path, name)
        elif name.isupper():
            try:
                constants[name] = ast.literal_eval(node)
            except (ValueError, TypeError, SyntaxError):
                pass

    op_type = constants["OP_TYPE"]
    if not isinstance(op_type, str) or not op_type:
        raise ProblemFileError(path, f"OP_TYPE must be a non-empty string, got {op_type!r}")
    precisions = _string_list(path, "SUPPORTED_PRECISIONS", constants["SUPPORTED_PRECISIONS"])
    unknown = [p for p in precisions if p not in PROBLEM_PRECISIONS]
    if unknown:
        raise ProblemFileError(
            path, f"SUPPORTED_PRECISIONS has unknown precision(s) {unknown}; known: {sorted(PROBLEM_PRECISIONS)}"
        )
    hardware = _string_list(path, "HARDWARE_REQUIRED", constants["HARDWARE_REQUIRED"])
    unknown = [h for h in hardware if h not in KNOWN_HARDWARE]
    if unknown:
        raise ProblemFileError(
            path, f"HARDWARE_REQUIRED has unknown GPU name(s) {unknown}; known: {sorted(KNOWN_HARDWARE)}"
        )

    sizes = size_variables_of(tree)
    reduced = constants.get("REDUCED_SIZES", {})
    if not isinstance(reduced, dict):
        raise ProblemFileError(path, f"REDUCED_SIZES must be a dict literal, got {type(reduced).__name__}")
    unknown = [k for k in reduced if k not in sizes]
    if unknown:
        raise ProblemFileError(
            path, f"REDUCED_SIZES names {unknown}, which are not size variables of the file ({sorted(sizes)})"
        )
    cpu_unsupported = constants.get("CPU_UNSUPPORTED")
    if cpu_unsupported is not None and not isinstance(cpu_unsupported, str):
        raise ProblemFileError(path, "CPU_UNSUPPORTED must be a string giving the reason")

    return Problem(
        problem_id=f"{category}/{path.stem}",
        path=path,
        category=category,
        level=_level_of(path, category, constants),
        op_type=op_type,
        supported_precisions=tuple(precisions),
        hardware_required=tuple(hardware),
        gpus=splits_of(category, path.name),
        size_variables=tuple(sizes.items()),
        reduced_sizes=tuple(reduced.items()),
        cpu_unsupported=cpu_unsupported,
        constants=tuple(sorted(constants.items())),
    )


def _string_list(path: Path, name: str, value: Any) -> list[str]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ProblemFileError(path, f"{name} must be a list of strings, got {value!r}")
    return list(value)


def _level_of(path: Path, category: str, constants: Mapping[str, Any]) -> int:
    if category.startswith("level") and category[5:].isdigit():
        return int(category[5:])
    constant = LEVEL_CONSTANTS.get(category)
    if constant and constant in constants:
        level = constants[constant]
        if not isinstance(level, int) or isinstance(level, bool):
            raise ProblemFileError(path, f"{constant} must be an int, got {level!r}")
        return level
    return 1


def discover(root: Path | str | None = None, split: str | None = None) -> list[Problem]:
    """Every problem under `root` (default: the bundled `problems/`), optionally one split only.

    Sorted by category order, then by file name as the published harness does. Raises a single
    CatalogError listing every malformed file.
    """
    root = Path(root) if root is not None else default_problems_dir()
    if not root.is_dir():
        raise FileNotFoundError(f"problems folder {root} does not exist")
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    problems: list[Problem] = []
    errors: list[ProblemFileError] = []
    for category in CATEGORIES:
        folder = root / category
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.py"), key=lambda p: p.name):
            if path.name.startswith("_"):
                continue
            try:
                problems.append(read_problem(path, root))
            except ProblemFileError as exc:
                errors.append(exc)
    if errors:
        raise CatalogError(errors)
    if split is not None:
        problems = [p for p in problems if split in p.gpus]
    return problems


class UnknownProblemError(KeyError):
    """A problem id the catalog does not know; the message suggests the nearest ids.

    A KeyError (what callers already catch) whose `str()` is the plain message, not its repr.
    """

    def __init__(self, problem_id: str, root: Path, suggestions: list[str]):
        self.problem_id = problem_id
        self.suggestions = suggestions
        hint = (
            f"did you mean {' or '.join(suggestions)}?"
            if suggestions
            else "`kbv3 ls` lists the ids (they look like level1/23_Softmax)"
        )
        self.message = f"no problem {problem_id!r} under {root}; {hint}"
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


def suggest_ids(problem_id: str, known: Iterable[str], limit: int = 3) -> list[str]:
    """The known ids nearest to a mistyped one: same file stem first (`23_Softmax` ->
    `level1/23_Softmax`), then close spellings."""
    import difflib

    known = list(known)
    pid = problem_id.strip().removesuffix(".py").replace("\\", "/").strip("/")
    stem = pid.rsplit("/", 1)[-1].lower()
    same_stem = [k for k in known if k.rsplit("/", 1)[-1].lower() == stem]
    if same_stem:
        return same_stem[:limit]
    close = difflib.get_close_matches(pid, known, n=limit, cutoff=0.6)
    if close:
        return close
    by_stem = {k.rsplit("/", 1)[-1].lower(): k for k in known}
    return [by_stem[s] for s in difflib.get_close_matches(stem, list(by_stem), n=limit, cutoff=0.6)]


def get_problem(problem_id: str, root: Path | str | None = None) -> Problem:
    """One problem by id (`level1/40_LayerNorm`; `.py` suffix tolerated).

    Raises UnknownProblemError (a KeyError) suggesting the nearest ids when there is none."""
    root = Path(root) if root is not None else default_problems_dir()
    pid = problem_id.removesuffix(".py")
    path = root / f"{pid}.py"
    if not pid or not path.is_file() or pid.startswith(("/", ".")):
        known = [p.problem_id for p in discover(root)]
        raise UnknownProblemError(problem_id, root, suggest_ids(problem_id, known))
    return read_problem(path, root)


def by_id(problems: Iterable[Problem]) -> dict[str, Problem]:
    return {p.problem_id: p for p in problems}
