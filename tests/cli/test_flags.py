"""One flag name, one meaning (issue 33, items 5 and 6): a flag several verbs take is declared
once (`cli/flags.py`) and reads the same in every verb's help; `--problems` is a folder
everywhere and problem ids go in `--only`; every usage error starts `kbv3 VERB: `, whether
argparse or a verb found it."""

from __future__ import annotations

import argparse
import re
from collections import defaultdict

import pytest

from kernelbench_v3.cli import args as cli_args
from kernelbench_v3.cli.main import build_parser
from tests.cli.test_cli_errors import one_line, run
from tests.paths import EXAMPLES

# Flags whose value is a different thing in each verb, so their help says which.
PER_VERB = {
    "--out": "what is written differs: a .jsonl, a solution file, a run folder, a Parquet file, a folder",
    "--model": "the model to query (generate, agent) or the name recorded with the result (eval, eval-batch)",
    "--timeout": "the step it limits differs: one request (generate, agent), one evaluation step (eval)",
    "--sizes": "eval's NAME=VALUE; eval-batch only points to --shapes (hidden)",
    "--concurrency": "what runs at once differs: requests (generate), episodes (agent)",
}


def _verb_flags() -> dict[str, dict[str, argparse.Action]]:
    """flag -> {verb: its action} over every verb of `kbv3`."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flags: dict[str, dict[str, argparse.Action]] = defaultdict(dict)
    for verb, verb_parser in sub.choices.items():
        for action in verb_parser._actions:
            for option in action.option_strings:
                if option.startswith("--") and option != "--help":
                    flags[option][verb] = action
    return flags


def test_a_shared_flag_reads_the_same_in_every_verb():
    drifted = {}
    for flag, by_verb in _verb_flags().items():
        if len(by_verb) < 2 or flag in PER_VERB:
            continue
        seen = {(a.help, a.type, tuple(a.choices or ()), a.metavar) for a in by_verb.values()}
        if len(seen) > 1:
            drifted[flag] = {verb: a.help for verb, a in by_verb.items()}
    assert not drifted, drifted


def test_problems_is_a_folder_and_only_takes_ids_in_every_verb():
    flags = _verb_flags()
    assert {verb: a.type for verb, a in flags["--problems"].items() if a.type is not cli_args.problems_dir} == {}
    assert "generate" in flags["--problems"] and {"generate", "baselines"} <= set(flags["--only"])
    assert len({a.type for a in flags["--only"].values()}) == 1


GENERATE = ["generate", "--split", "h100", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"]


@pytest.mark.parametrize(
    "extra, expected",
    [
        (["--problems", "level1/23_Softmax"], "problem ids go in --only level1/23_Softmax"),
        (["--problems", "level1/23_Softmax,level1/26_GELU_"], "problem ids go in --only"),
        (["--problems-dir", "problems"], "argument --problems-dir: renamed --problems"),
        (["--only", "level1/23_Softmx"], "did you mean level1/23_Softmax"),
    ],
)
def test_generate_points_from_the_old_flags_to_the_new(extra, expected, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no ./problems folder here
    code, _, err = run([*GENERATE, *extra, "--out", str(tmp_path / "run")], capsys)
    assert code == 2 and expected in one_line(err), err
    assert not (tmp_path / "run" / "responses.jsonl").exists()


def test_generate_takes_a_problems_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, _, err = run([*GENERATE, "--problems", "problems", "--out", str(tmp_path / "run")], capsys)
    line = one_line(err)
    assert code == 2 and "problems folder 'problems' does not exist; omit --problems" in line, line


USAGE_LINE = re.compile(r"^kbv3 [a-z-]+: argument (--[a-z-]+|[A-Z_]+):")


@pytest.mark.parametrize(
    "argv",
    [
        [
            "eval",
            "--problem",
            "level1/23_Softmax",
            "--solution",
            str(EXAMPLES / "level1/23_Softmax.py"),
            "--seeds",
            "x",
        ],
        ["eval", "--problem", "level1/23_Sofmax", "--solution", str(EXAMPLES / "level1/23_Softmax.py")],
        ["baselines", "--split", "h100", "--only", "level1/no_such", "--device", "cpu"],
        ["ls", "--split", "h900"],
    ],
    ids=["argparse type", "verb check", "baselines only", "argparse split"],
)
def test_every_usage_error_has_one_prefix(argv, capsys):
    code, _, err = run(argv, capsys)
    line = one_line(err)
    assert code == 2 and USAGE_LINE.match(line) and ": error:" not in line, line


GPU_TIMING_VERBS = ("eval", "eval-batch", "baselines", "serve", "demo", "agent")


def test_every_verb_that_times_on_a_gpu_takes_no_mps_and_main_asks_for_mps_by_it(monkeypatch, capsys):
    import contextlib

    from kernelbench_v3.cli import main as cli_main
    from kernelbench_v3.cli.args import CliError
    from kernelbench_v3.evaluate import mps

    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    with_flag = {
        name for name, p in subparsers.choices.items() if any("--no-mps" in a.option_strings for a in p._actions)
    }
    assert set(GPU_TIMING_VERBS) <= with_flag
    assert "ls" not in with_flag and "report" not in with_flag
    asked = []

    @contextlib.contextmanager
    def recording_start(ask):
        asked.append(ask)
        raise CliError("stop here", code=2)
        yield  # pragma: no cover

    monkeypatch.setattr(cli_main, "mps_starting", recording_start)  # the public API's name for mps.starting
    monkeypatch.delenv(mps.ASK_ENV, raising=False)
    sol = str(EXAMPLES / "level1/23_Softmax.py")
    for argv, expected in (
        (["eval", "--problem", "level1/23_Softmax", "--solution", sol], True),
        (["eval", "--problem", "level1/23_Softmax", "--solution", sol, "--no-mps"], False),
        (["eval", "--problem", "level1/23_Softmax", "--solution", sol, "--device", "cpu"], False),
        (["ls"], False),
    ):
        assert cli_main.main(argv) == 2
        assert asked[-1] is expected, argv
    monkeypatch.setenv(mps.ASK_ENV, "0")
    cli_main.main(["eval", "--problem", "level1/23_Softmax", "--solution", sol])
    assert asked[-1] is False
