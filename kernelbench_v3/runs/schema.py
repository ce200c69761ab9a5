"""The runs table's schema: its columns and types, and the validation that names bad rows.

Owns the published `results.csv` schema of `Infatoshi/kernelbench-v3-runs` (18 columns), which of
them evaluator records must have, the GPU names it uses, how a `level` cell is read, and
`validate_runs`, which collects every defect (missing/extra column, wrong type, unknown GPU,
contradictory values) with its row and column before raising one RunsSchemaError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..catalog.problem import CATEGORIES
from ..vocab import PUBLISHED_RUNS_COLUMNS, RECORD_RUNS_COLUMNS, SPLIT_OF_RUNS_GPU

# The type each published column (vocab.PUBLISHED_RUNS_COLUMNS, same order) must parse as.
RUNS_SCHEMA: dict[str, str] = {
    "model": "str",
    "gpu": "gpu",
    "level": "level",
    "problem": "str",
    "compiled": "bool",
    "correct": "bool",
    "speedup": "float",
    "ref_ms": "float",
    "sol_ms": "float",
    "turns": "int",
    "total_tokens": "int",
    "estimated_cost_usd": "float",
    "op_type": "str",
    "baseline_type": "str",
    "precision_used": "str",
    "run_dir": "str",
    "solution_link": "str",
    "baseline_link": "str",
}
NOT_NULL = ("model", "gpu", "problem", "compiled", "correct")
RECORD_MARKERS = ("problem_id", "status", "evaluator_version")

# The model name given to evaluator records that have none (`kbv3 eval` without --model).
UNNAMED_MODEL = "(unnamed)"


_TRUE = {"true", "1", "1.0", "yes"}
_FALSE = {"false", "0", "0.0", "no"}
_MAX_LISTED = 20


@dataclass(frozen=True)
class SchemaProblem:
    """One defect of a runs table: which row (0-based data row; None = whole table) and column."""

    row: int | None
    column: str
    message: str

    def describe(self, origin: str, header_lines: int) -> str:
        if self.row is None:
            return f"{origin}: column {self.column!r}: {self.message}"
        where = f"row {self.row}"
        if header_lines:
            where += f" (line {self.row + header_lines + 1})"
        return f"{origin} {where}, column {self.column!r}: {self.message}"


class RunsSchemaError(ValueError):
    """A runs table that breaks the schema; lists every defect found (first 20 in the message)."""

    def __init__(self, origin: str, problems: list[SchemaProblem], header_lines: int = 0):
        self.origin = origin
        self.problems = problems
        lines = [p.describe(origin, header_lines) for p in problems[:_MAX_LISTED]]
        more = f"\n  ... and {len(problems) - _MAX_LISTED} more" if len(problems) > _MAX_LISTED else ""
        super().__init__(f"{len(problems)} schema error(s) in {origin}:\n  - " + "\n  - ".join(lines) + more)


def canonical_gpu(value: Any) -> str | None:
    """ "RTX 3090" / "rtx3090" / "h100" -> "RTX3090" / "H100"; None when not a known GPU."""
    key = re.sub(r"[\s_\-]", "", str(value)).upper()
    return key if key in SPLIT_OF_RUNS_GPU else None


def parse_level(value: Any) -> tuple[int | None, str | None] | None:
    """A `level` cell -> (level number, category hint); None when it cannot be read.

    1 / "1" / 1.0 -> (1, None); "level3" -> (3, "level3"); "graphics" -> (None, "graphics").
    """
    if _is_null(value):
        return (None, None)
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return (int(value), None) if value >= 1 else None
    if isinstance(value, (float, np.floating)):
        return (int(value), None) if float(value).is_integer() and value >= 1 else None
    text = str(value).strip().lower()
    if text.isdigit():
        return (int(text), None) if int(text) >= 1 else None
    match = re.fullmatch(r"level[ _]?(\d+)", text)
    if match:
        return (int(match.group(1)), f"level{int(match.group(1))}")
    if text in CATEGORIES:
        return (None, text)
    try:
        number = float(text)
    except ValueError:
        return None
    return (int(number), None) if number.is_integer() and number >= 1 else None


def _is_null(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return value.strip() == ""
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _parse_bool(value: Any) -> bool | None:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    return True if text in _TRUE else False if text in _FALSE else None


def _parse_float(value: Any) -> float | None:
    if isinstance(value, (bool, np.bool_)):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if not np.isnan(number) else None


def validate_runs(
    frame: pd.DataFrame, *, origin: str = "runs", records: bool = False, header_lines: int = 0
) -> pd.DataFrame:
    """Check columns, types, GPU names and row consistency; return a typed copy.

    Published tables must have exactly the published columns. Evaluator records may carry more
    (kept as they are) and may lack the runs-only columns (filled with nulls).
    """
    problems: list[SchemaProblem] = []
    needed = RECORD_RUNS_COLUMNS if records else PUBLISHED_RUNS_COLUMNS
    for column in needed:
        if column not in frame.columns:
            problems.append(
                SchemaProblem(
                    None,
                    column,
                    "missing column"
                    + (
                        " (evaluator records must have the runs columns " + ", ".join(RECORD_RUNS_COLUMNS) + ")"
                        if records
                        else f" (the published columns are: {', '.join(PUBLISHED_RUNS_COLUMNS)})"
                    ),
                )
            )
    if not records:
        for column in frame.columns:
            if column not in RUNS_SCHEMA:
                problems.append(SchemaProblem(None, str(column), "unexpected column (not in the published schema)"))
    if problems:
        raise RunsSchemaError(origin, problems, header_lines)

    out = frame.copy() if records else frame[list(PUBLISHED_RUNS_COLUMNS)].copy()
    out.index = pd.RangeIndex(len(out))
    if records:  # `kbv3 eval` without --model records an empty name: such records are still runs
        out["model"] = [UNNAMED_MODEL if _is_null(m) else m for m in out["model"]]
    typed: dict[str, list[Any]] = {}
    levels: list[int | None] = []
    hints: list[str | None] = []
    for column, kind in RUNS_SCHEMA.items():
        if column not in out.columns:
            continue
        values = out[column].tolist()
        parsed: list[Any] = []
        for row, value in enumerate(values):
            if _is_null(value):
                if column in NOT_NULL:
                    problems.append(SchemaProblem(row, column, "is empty; every row needs a value"))
                parsed.append(None)
                if kind == "level":
                    levels.append(None)
                    hints.append(None)
                continue
            result, error = _parse_cell(kind, value)
            if error:
                problems.append(SchemaProblem(row, column, error))
            if kind == "level":
                levels.append(result[0] if result else None)
                hints.append(result[1] if result else None)
            else:
                parsed.append(result)
        if kind != "level":
            typed[column] = parsed
    problems.extend(_consistency_problems(typed))
    if problems:
        raise RunsSchemaError(origin, sorted(problems, key=lambda p: (p.row, p.column)), header_lines)

    for column, kind in RUNS_SCHEMA.items():
        if kind == "level":
            continue
        if column not in typed:
            out[column] = pd.Series([None] * len(out), dtype=_DTYPES[kind])
            continue
        out[column] = pd.Series(typed[column], dtype=_DTYPES[kind])
    if "level" not in out.columns:
        levels, hints = [None] * len(out), [None] * len(out)
    out["level"] = pd.Series(levels, dtype="Int64")
    out["category_hint"] = pd.Series(hints, dtype=object)
    out["split"] = out["gpu"].map(SPLIT_OF_RUNS_GPU)
    return out


_DTYPES = {"str": object, "gpu": object, "bool": "boolean", "float": "float64", "int": "Int64"}


def _parse_cell(kind: str, value: Any) -> tuple[Any, str | None]:
    if kind == "str":
        return str(value), None
    if kind == "gpu":
        gpu = canonical_gpu(value)
        if gpu is None:
            return None, f"unknown GPU {value!r}; the runs dataset names {', '.join(SPLIT_OF_RUNS_GPU)}"
        return gpu, None
    if kind == "level":
        level = parse_level(value)
        if level is None:
            return None, (
                f"level {value!r} is not a level number (1-4), 'levelN' or a category ({', '.join(CATEGORIES)})"
            )
        return level, None
    if kind == "bool":
        parsed = _parse_bool(value)
        if parsed is None:
            return None, f"{value!r} is not a boolean (True/False)"
        return parsed, None
    number = _parse_float(value)
    if number is None:
        return None, f"{value!r} is not a number"
    if kind == "int":
        if not number.is_integer():
            return None, f"{value!r} is not a whole number"
        if number < 0:
            return None, f"{value!r} is negative"
        return int(number), None
    if not np.isfinite(number):
        return None, f"{value!r} is not finite"
    return number, None


def _consistency_problems(typed: dict[str, list[Any]]) -> list[SchemaProblem]:
    """Rows whose values contradict each other (a correct run that did not compile, ...)."""
    problems = []
    compiled, correct = typed.get("compiled", []), typed.get("correct", [])
    for row, (ok_compile, ok) in enumerate(zip(compiled, correct)):
        if ok and ok_compile is False:
            problems.append(SchemaProblem(row, "correct", "is True but compiled is False"))
    for column in ("speedup", "ref_ms", "sol_ms", "estimated_cost_usd"):
        for row, value in enumerate(typed.get(column, [])):
            if value is None:
                continue
            if column == "estimated_cost_usd" and value < 0:
                problems.append(SchemaProblem(row, column, f"{value!r} is negative"))
            elif column != "estimated_cost_usd" and value <= 0:
                problems.append(SchemaProblem(row, column, f"{value!r} must be > 0"))
    return problems
