"""The Hugging Face dataset: building the Hub folder, loading a split, pushing, and rows -> modules.

Owns the dataset's schema (`SCHEMA`), the row of one problem (`problem_row`), the build of a
Hub-ready folder (`build`: one Parquet file per GPU split plus the card `README.md` whose YAML
`configs` map the splits to their files), publishing a built folder (`push_to_hub`), and turning a row back into a
running module (`materialize`, `instantiate`), refusing rows whose `sha256` does not match
their `code`. Loading a split (from a built folder or the Hub) is `loading`'s, re-exported
here (`load_problems`).

The build is deterministic (rows in catalog order, fixed Parquet writer options, no timestamps)
and all-or-nothing: everything is computed in memory, written to a temporary sibling folder and
renamed into place, so a malformed problem leaves no partial output. `datasets` and
`huggingface_hub` are imported only inside the functions that need them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..catalog.materialize import (  # noqa: F401 (RowIntegrityError, verify_row: re-exported, they lived here)
    Instance,
    MaterializeError,
    RowIntegrityError,
    load_module,
    make_inputs,
    make_model,
    verify_row,
)
from ..catalog.problem import CatalogError, Problem, ProblemFileError, SizeValue, discover
from ..vocab import SPLITS
from .card import DATA_DIR, split_file
from .loading import (  # noqa: F401 - re-exported: the dataset's API in one place
    CARD_FILE,
    DEFAULT_REPO_ID,
    HubUnavailableError,
    load_problems,
)

INPUT_SPEC = pa.struct(
    [
        ("kind", pa.string()),  # "tensor", or the Python type name of a non-tensor input
        ("shape", pa.list_(pa.int64())),  # tensors only
        ("dtype", pa.string()),  # tensors only, torch name without "torch." ("float32")
        ("value", pa.string()),  # non-tensors only, as JSON
    ]
)
OUTPUT_SPEC = pa.struct([("shape", pa.list_(pa.int64())), ("dtype", pa.string())])

# (column, type, nullable). The card's `dataset_info.features` is generated from this list.
COLUMNS: tuple[tuple[str, pa.DataType, bool], ...] = (
    ("problem_id", pa.string(), False),
    ("name", pa.string(), False),
    ("file_name", pa.string(), False),
    ("category", pa.string(), False),
    ("level", pa.int64(), False),
    ("op_type", pa.string(), False),
    ("supported_precisions", pa.list_(pa.string()), False),
    ("hardware_required", pa.list_(pa.string()), False),
    ("gpus", pa.list_(pa.string()), False),
    ("code", pa.string(), False),
    ("sha256", pa.string(), False),
    ("init_inputs", pa.string(), False),
    ("input_specs", pa.list_(INPUT_SPEC), False),
    ("output_spec", OUTPUT_SPEC, True),
    ("flops", pa.int64(), True),
    ("bytes", pa.int64(), True),
    ("null_reason", pa.string(), True),
)
PROMPT_COLUMN = ("prompt", pa.string(), False)

# Fixed writer options: together with fixed row order they make the Parquet bytes reproducible
# (pyarrow writes no timestamp; `created_by` names the pyarrow version).
PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 9,
    "use_dictionary": True,
    "write_statistics": False,
    "row_group_size": 1 << 20,
}


@dataclass(frozen=True)
class BuildResult:
    """What `build` wrote: the folder, the rows per split, and whether a `prompt` column is in."""

    out_dir: Path
    counts: Mapping[str, int]
    with_prompts: bool

    def split_path(self, split: str) -> Path:
        return self.out_dir / split_file(split)


def schema(with_prompts: bool) -> pa.Schema:
    columns = COLUMNS + ((PROMPT_COLUMN,) if with_prompts else ())
    return pa.schema([pa.field(name, dtype, nullable=nullable) for name, dtype, nullable in columns])


# --- rows ---------------------------------------------------------------------------------


def _roofline(problem: Problem, model: Any, inputs: Any) -> tuple[int | None, int | None, str | None]:
    """(flops, bytes, reason-if-null): the package's table, else an estimate on meta tensors."""
    from ..catalog.specs import describe_error
    from ..hardware.roofline import DEFAULT_ROOFLINE, estimate_roofline

    if problem.problem_id in DEFAULT_ROOFLINE:
        flops, min_bytes = DEFAULT_ROOFLINE[problem.problem_id]
        return int(flops), int(min_bytes), None
    try:
        flops, min_bytes = estimate_roofline(model, inputs)
    except Exception as exc:  # noqa: BLE001 - data-dependent forwards cannot be traced on meta
        return (
            None,
            None,
            (
                f"flops/bytes are null: {problem.problem_id} is not in the package's roofline table "
                f"and estimating it on meta tensors failed ({describe_error(exc)})"
            ),
        )
    return int(flops), int(min_bytes), None


def problem_row(problem: Problem) -> dict[str, Any]:
    """The dataset row of one problem (without the per-split `prompt`).

    Raises ProblemFileError naming the file when it cannot be imported or when `get_inputs()`,
    `get_init_inputs()` or the constructor fail on the meta device; a forward that cannot run
    on meta tensors only nulls `output_spec` (the reason goes to `null_reason`).
    """
    from ..catalog.specs import SpecsError, specs_of_file

    raw = problem.path.read_bytes()
    try:
        code = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProblemFileError(problem.path, f"is not UTF-8: {exc}") from None
    sha256 = hashlib.sha256(raw).hexdigest()
    try:
        specs = specs_of_file(problem.path, sha256)
    except SpecsError as exc:
        raise ProblemFileError(problem.path, str(exc)) from None
    flops, min_bytes, roofline_reason = _roofline(problem, specs.model, specs.inputs)
    reasons = [r for r in (specs.reason, roofline_reason) if r]
    return {
        "problem_id": problem.problem_id,
        "name": problem.name,
        "file_name": problem.file_name,
        "category": problem.category,
        "level": problem.level,
        "op_type": problem.op_type,
        "supported_precisions": list(problem.supported_precisions),
        "hardware_required": list(problem.hardware_required),
        "gpus": list(problem.gpus),
        "code": code,
        "sha256": sha256,
        "init_inputs": specs.init_inputs,
        "input_specs": specs.input_specs,
        "output_spec": specs.output_spec,
        "flops": flops,
        "bytes": min_bytes,
        "null_reason": "; ".join(reasons) or None,
    }


def prompt_renderer() -> Callable[[Problem, str], str] | None:
    """`kernelbench_v3.prompts.render(problem, split)` when that package is installed, else None."""
    try:
        from ..prompts.render import render
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith(f"{__package__}.prompts"):
            return None
        raise
    return render


def split_rows(
    problems: Sequence[Problem], render_prompt: Callable[[Problem, str], str] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Rows of every split, in catalog order. Every problem is imported once; errors of all the
    problems are collected and raised together as a CatalogError."""
    rows: dict[str, dict[str, Any]] = {}
    errors: list[ProblemFileError] = []
    for problem in problems:
        try:
            rows[problem.problem_id] = problem_row(problem)
        except ProblemFileError as exc:
            errors.append(exc)
    if errors:
        raise CatalogError(errors)
    out: dict[str, list[dict[str, Any]]] = {}
    for split in SPLITS:
        out[split] = []
        for problem in problems:
            if split not in problem.gpus:
                continue
            row = dict(rows[problem.problem_id])
            if render_prompt is not None:
                try:
                    row["prompt"] = render_prompt(problem, split)
                except Exception as exc:  # noqa: BLE001 - reported per file, like other defects
                    errors.append(
                        ProblemFileError(
                            problem.path, f"rendering its {split} prompt failed: {type(exc).__name__}: {exc}"
                        )
                    )
                    continue
            out[split].append(row)
    if errors:
        raise CatalogError(errors)
    return out


# --- build --------------------------------------------------------------------------------


def _check_target(out_dir: Path, overwrite: bool) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise FileExistsError(f"{out_dir} exists and is not a folder")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not overwrite:
        raise FileExistsError(
            f"{out_dir} is not empty; build into an empty or new folder, or pass overwrite=True "
            "(`--overwrite`) to replace it"
        )


def _move_into_place(staging: Path, out_dir: Path) -> None:
    """Rename the finished staging folder to `out_dir`, replacing what was there."""
    staging.chmod(0o755)  # mkdtemp makes it private
    if not out_dir.exists():
        os.replace(staging, out_dir)
        return
    aside = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
    aside.rmdir()
    os.replace(out_dir, aside)
    try:
        os.replace(staging, out_dir)
    except OSError:
        os.replace(aside, out_dir)  # put the old build back
        raise
    shutil.rmtree(aside)


def build(
    out_dir: Path | str,
    problems_dir: Path | str | None = None,
    *,
    overwrite: bool = False,
    with_prompts: bool | None = None,
) -> BuildResult:
    """Write the Hub-ready dataset folder for `problems_dir` (default: the bundled problems).

    `with_prompts`: add the per-split `prompt` column (None: when `kernelbench_v3.prompts` is
    importable). Raises CatalogError listing every malformed problem file, and writes nothing.
    """
    from .card import render_card

    out_dir = Path(out_dir).absolute()
    _check_target(out_dir, overwrite)
    problems = discover(problems_dir)
    if not problems:
        raise CatalogError([ProblemFileError(problems_dir or "problems", "no problem files found")])
    render_prompt = prompt_renderer() if with_prompts in (None, True) else None
    if with_prompts and render_prompt is None:
        raise ModuleNotFoundError("with_prompts=True needs kernelbench_v3.prompts, which is not installed")
    rows = split_rows(problems, render_prompt)
    tables = {split: pa.Table.from_pylist(rows[split], schema=schema(render_prompt is not None)) for split in SPLITS}
    card = render_card(tables)

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.building-", dir=out_dir.parent))
    try:
        (staging / DATA_DIR).mkdir()
        for split, table in tables.items():
            pq.write_table(table, staging / split_file(split), **PARQUET_OPTIONS)
        (staging / CARD_FILE).write_text(card, encoding="utf-8")
        _check_target(out_dir, overwrite)  # the folder may have filled up meanwhile
        _move_into_place(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return BuildResult(out_dir, {s: len(rows[s]) for s in SPLITS}, render_prompt is not None)


# --- check and push -----------------------------------------------------------------------


def check_folder(folder: Path | str) -> dict[str, int]:
    """Rows per split of a built folder; raises naming the missing file or the altered row."""
    folder = Path(folder)
    if not (folder / CARD_FILE).is_file():
        raise FileNotFoundError(f"{folder}: no {CARD_FILE}; is this a folder written by `kbv3 build`?")
    counts = {}
    for split in SPLITS:
        path = folder / split_file(split)
        if not path.is_file():
            raise FileNotFoundError(f"{folder}: split file {split_file(split)} is missing")
        table = pq.read_table(path, columns=["problem_id", "code", "sha256"])
        for row in table.to_pylist():
            verify_row(row, origin=f"{path}")
        counts[split] = table.num_rows
    return counts


def push_to_hub(
    folder: Path | str,
    repo_id: str = DEFAULT_REPO_ID,
    *,
    token: str | None = None,
    private: bool | None = None,
    commit_message: str = "Upload KernelBench-v3 problems (kbv3 build)",
    delete_patterns: list[str] | None = None,
):
    """Publish a built folder to the dataset repo `repo_id` (created if missing).

    The folder is checked first (every split present, every row's sha256 matches its code).
    `delete_patterns` removes remote files the upload does not replace, e.g. `["*.py"]` for the
    bare problem files of the old repo layout. Returns huggingface_hub's CommitInfo.
    """
    check_folder(folder)
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    return api.upload_folder(
        repo_id=repo_id,
        repo_type="dataset",
        folder_path=str(folder),
        commit_message=commit_message,
        delete_patterns=delete_patterns,
    )


# --- rows -> modules ----------------------------------------------------------------------


def module_from_row(row: Mapping[str, Any], sizes: Mapping[str, SizeValue] | None = None) -> ModuleType:
    """The row's problem as an imported module (from a real file), after checking its sha256."""
    verify_row(row)
    name = row.get("name") or str(row["problem_id"]).rsplit("/", 1)[-1]
    return load_module(row["code"], sizes, stem=name)


def instantiate_row(
    row: Mapping[str, Any],
    device: Any = "cpu",
    seed: int = 0,
    sizes: Mapping[str, SizeValue] | None = None,
) -> Instance:
    """Model and inputs of a row on `device`, exactly as `materialize.instantiate` builds a
    problem from its file: the model after seeding with `seed`, the inputs after re-seeding."""
    module = module_from_row(row, sizes)
    return Instance(module=module, model=make_model(module, device, seed), inputs=make_inputs(module, device, seed))
