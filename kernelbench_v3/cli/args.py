"""Argument checks of the `kbv3` command: wrong values become one-line usage errors.

Owns the argparse value types (each error names its flag and the accepted form), the parser
class whose errors are one line, `CliError` (a user's mistake found after parsing, with its exit
code), `ignore_further_interrupts` (a reported Ctrl-C keeps its 130), and the up-front checks a
verb runs before it creates anything: is CUDA there when it is asked for, is the output's folder
writable, is the problem known, in the split, and are the size overrides its own size variables
with sensible values.
"""

from __future__ import annotations

import argparse
import ast
import os
import signal
from pathlib import Path
from typing import Any


class CliError(Exception):
    """A user's mistake found by a verb; `main` prints `kbv3 <verb>: <message>` and exits `code`."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def ignore_further_interrupts() -> None:
    """Once an interrupt is being reported, the exit code must stay 130.

    A second Ctrl-C, or a SIGINT still pending from a blocking call that was woken by the first,
    would otherwise raise KeyboardInterrupt again on the way out, and Python would then end the
    process by the signal (-2) instead of with the code the CLI promises."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread (main() called from a thread): nothing to guard
        pass


class KbParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr (exit 2), in the form every
    other usage error of `kbv3` takes (`main` prints a CliError the same way): `kbv3 VERB:
    argument --flag: what is wrong`, without argparse's own "error:" word."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


# ---------------------------------------------------------------- value types


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be positive (a number of seconds), got {text}")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def non_negative_int(text: str) -> int:
    if text.strip() == "0":
        return 0
    return positive_int(text)


def non_negative_number(text: str) -> float:
    """A finite number >= 0 (a temperature, a price)."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def seeds(text: str) -> tuple[int, ...]:
    """`42,123` -> (42, 123)."""
    values = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            values.append(int(item))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{item!r} is not an integer seed; give comma-separated integers, e.g. 42,123"
            ) from None
        if values[-1] < 0:
            raise argparse.ArgumentTypeError(f"seed {item} is negative; seeds are integers >= 0")
    if not values:
        raise argparse.ArgumentTypeError("no seeds given; e.g. 42,123")
    return tuple(values)


def gpu_indices(text: str) -> tuple[int, ...]:
    """`0,1` -> (0, 1): distinct CUDA device indices."""
    values: list[int] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if not item.isdigit():
            raise argparse.ArgumentTypeError(
                f"{item!r} is not a GPU index; give comma-separated indices as nvidia-smi numbers them, e.g. 0,1"
            )
        if int(item) in values:
            raise argparse.ArgumentTypeError(f"GPU {item} is listed twice")
        values.append(int(item))
    if not values:
        raise argparse.ArgumentTypeError("no GPU index given; e.g. 0,1")
    return tuple(values)


def split_name(text: str) -> str:
    """The split a result is reported for (`H100`, `h100` -> `h100`; `RTX 3090` -> `rtx3090`).

    `--gpu` names a split, as `--split` does in every other verb; the GPU an evaluation ran on
    is recorded on its own (`Record.ran_on`)."""
    from ..vocab import SPLITS, split_of

    split = split_of(text) if text.strip() else None
    if split is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a split; --gpu names the split the result is reported for: "
            f"{', '.join(SPLITS)} (the GPU it runs on is recorded separately, as ran_on)"
        )
    return split


def split_arg(text: str) -> str:
    """`--split`: a split by any of its spellings (`h100`, `H100`, `RTX 3090`), as `--gpu` takes it."""
    from ..vocab import SPLITS, split_of

    split = split_of(text) if text.strip() else None
    if split is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a split; choose one of {', '.join(SPLITS)}")
    return split


SPLIT_METAVAR = "{rtx3090,h100,b200}"


def sizes_text(text: str) -> dict[str, Any]:
    """`batch_size=16,dim=256` -> {"batch_size": 16, "dim": 256} (numbers or True/False)."""
    sizes: dict[str, Any] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise argparse.ArgumentTypeError(f"{item.strip()!r} is not NAME=VALUE (e.g. batch_size=16,dim=256)")
        try:
            value = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            value = None
        if type(value) not in (int, float, bool):
            raise argparse.ArgumentTypeError(f"{item.strip()!r}: {raw.strip()!r} is not a number or True/False")
        sizes[name] = value
    if not sizes:
        raise argparse.ArgumentTypeError("no size given; e.g. batch_size=16,dim=256")
    return sizes


def problems_dir(text: str) -> Path:
    """A problems folder: it exists and has at least one category folder (level1, ...)."""
    from ..catalog.problem import CATEGORIES

    path = Path(text).expanduser()
    if not path.is_dir():
        # `--problems level1/23_Softmax` is what `--problems` meant in `generate` before it named
        # a folder everywhere: point to --only, which takes ids.
        looks_like_ids = "," in text or (text.count("/") == 1 and not text.startswith((".", "/", "~")))
        hint = f"problem ids go in --only {text}" if looks_like_ids else "omit --problems for the bundled problems"
        raise argparse.ArgumentTypeError(f"problems folder {text!r} does not exist; {hint}")
    if not any((path / c).is_dir() for c in CATEGORIES):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a problems folder: it has none of the folders {', '.join(CATEGORIES)}"
        )
    return path


# ---------------------------------------------------------------- checks before running


def check_cuda(what: str) -> int:
    """The number of visible CUDA GPUs; CliError when there is none."""
    import torch

    if not torch.cuda.is_available():
        build = f"torch {torch.__version__}" + ("" if torch.version.cuda else ", a CPU-only build")
        raise CliError(f"{what}: no CUDA GPU is visible ({build}); use --device cpu")
    return torch.cuda.device_count()


def check_gpus(device: str | None, gpus: tuple[int, ...] | None, executor: str) -> str:
    """The batch's device, after checking `--device` / `--gpus` against this machine.

    With Ray the GPUs are the cluster's, so nothing local is checked."""
    if executor == "ray":
        if device is None:
            import torch

            return "cuda" if torch.cuda.is_available() else "cpu"
        return device
    if device == "cpu":
        if gpus:
            raise CliError("argument --gpus: only used with --device cuda; on the CPU use --workers N")
        return "cpu"
    if device == "cuda" or gpus:
        count = check_cuda("--device cuda" if device == "cuda" else f"--gpus {','.join(map(str, gpus or ()))}")
        missing = [g for g in gpus or () if g >= count]
        if missing:
            raise CliError(
                f"argument --gpus: no GPU {', '.join(map(str, missing))}; "
                f"this machine has {count} (indices 0-{count - 1})"
            )
        return "cuda"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def check_input_file(path: Path, what: str, hint: str = "") -> None:
    """CliError unless `path` is a file: a folder and a missing path are told apart."""
    path = Path(path)
    if path.is_file():
        return
    problem = "is a folder, not a file" if path.is_dir() else "does not exist"
    raise CliError(f"{what}: {path} {problem}" + (f"; {hint}" if hint else ""))


def check_writable_parent(path: Path, what: str) -> None:
    """CliError unless `path` can be created: its nearest existing ancestor is a writable folder
    (and `path` itself, when it exists, is not the wrong kind of thing to replace)."""
    path = Path(path).expanduser().absolute()
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise CliError(f"{what}: cannot write {path}: {ancestor} is not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise CliError(f"{what}: cannot write {path}: {ancestor} is not writable; choose another location")


def check_eval_problem(problem_id: str, gpu: str, sizes: dict[str, Any] | None, root: Path | None) -> dict[str, Any]:
    """The size overrides, after checking that the problem exists, is in `gpu`'s split and has
    those size variables with values of the right kind."""
    from ..catalog.problem import ProblemFileError, get_problem
    from ..vocab import SPLITS

    try:
        problem = get_problem(problem_id, root)
    except KeyError as exc:
        raise CliError(f"argument --problem: {exc}") from None
    except (ProblemFileError, FileNotFoundError) as exc:
        raise CliError(f"argument --problem: {exc}") from None
    if gpu in SPLITS and gpu not in problem.gpus:
        where = ", ".join(problem.gpus) or "no split"
        hint = f"; pass --gpu {problem.gpus[0]}" if problem.gpus else ""
        raise CliError(f"argument --gpu: {problem.problem_id} is not in the {gpu} split (it is in: {where}){hint}")
    sizes = dict(sizes or {})
    known = problem.sizes
    unknown = [name for name in sizes if name not in known]
    if unknown:
        listed = ", ".join(f"{k}={v}" for k, v in known.items()) or "none"
        raise CliError(
            f"argument --sizes: {problem.problem_id} has no size variable "
            f"{', '.join(unknown)}; its size variables (with defaults) are: {listed}"
        )
    for name, value in sizes.items():
        default = known[name]
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise CliError(f"argument --sizes: {name}={value}: {name} is True/False (default {default})")
        elif isinstance(default, int) and default > 0:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CliError(
                    f"argument --sizes: {name}={value}: {name} is a size (default {default}) "
                    "and must be a positive integer"
                )
        elif isinstance(value, bool):
            raise CliError(f"argument --sizes: {name}={value}: {name} is a number (default {default})")
    return sizes


def default_device() -> str:
    """cuda when torch sees a GPU, else cpu."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
