"""The README's snippets and commands run (issue 22): every ```python block is executed offline
from the checkout (the dataset block against a folder `kbv3 build` wrote, `push_to_hub` stubbed:
it needs a token and the network), and every `kbv3` command line names a verb and flags that
exist."""

from __future__ import annotations

import re
import shlex
import warnings

import pytest

from kernelbench_v3.cli.main import main
from tests.paths import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)
BASH_BLOCKS = re.findall(r"```bash\n(.*?)```", README, flags=re.S)


def _block(word: str) -> str:
    found = [b for b in PYTHON_BLOCKS if word in b]
    assert len(found) == 1, f"one README python block with {word!r}"
    return found[0]


def test_every_python_block_is_covered_below():
    covered = {"instantiate_row": 1, "EvalOptions": 1, "flag_anomalies": 1, "Evaluator": 1}
    assert len(PYTHON_BLOCKS) == len(covered)
    for word in covered:
        _block(word)


def test_the_runs_snippet_runs(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixture's unmatched rows, reported by design
        exec(compile(_block("flag_anomalies"), "README.md (runs)", "exec"), namespace)
    out = capsys.readouterr().out
    assert "3/43" in out  # the CLI's count, from the library calls alone
    assert "no_custom_kernel" in out


@pytest.mark.slow  # builds the dataset
def test_the_dataset_snippet_runs(tmp_path, monkeypatch):
    from kernelbench_v3.dataset import hub

    assert main(["build", str(tmp_path / "out" / "hub")]) == 0
    pushed = []
    monkeypatch.setattr(hub, "push_to_hub", lambda *args, **kwargs: pushed.append(args))
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(_block("instantiate_row"), "README.md (dataset)", "exec"), namespace)
    assert namespace["out"] is not None and pushed == [("out/hub", "Infatoshi/kernelbench-v3-problems")]


@pytest.mark.slow  # two evaluations on the CPU
def test_the_evaluator_snippet_runs(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    namespace: dict = {}
    exec(compile(_block("EvalOptions"), "README.md (evaluator)", "exec"), namespace)
    record = namespace["record"]
    assert record.correct, (record.failed_check, record.error)
    assert record.speedup is None and record.timing_meaningful is False  # CPU: no speedup


def _kbv3_lines() -> list[str]:
    lines = []
    for block in BASH_BLOCKS:
        for line in block.splitlines():
            command = line.split("#", 1)[0].strip()
            if command.startswith("kbv3 "):
                lines.append(command)
            elif ".venv/bin/kbv3 " in command:
                lines.append("kbv3 " + command.split(".venv/bin/kbv3 ", 1)[1])
    return lines


@pytest.mark.parametrize("line", _kbv3_lines())
def test_every_kbv3_command_names_a_verb_and_flags_that_exist(line, capsys):
    words = shlex.split(line.replace("[", " ").replace("]", " ").replace("|", " "))[1:]
    if words == ["--version"]:
        with pytest.raises(SystemExit) as exit_:
            main(["--version"])
        assert exit_.value.code == 0 and "kbv3" in capsys.readouterr().out
        return
    verb = [words[0]] + (["summary"] if words[0] == "runs" else [])
    with pytest.raises(SystemExit) as exit_:
        main([*verb, "--help"])
    assert exit_.value.code == 0
    help_text = capsys.readouterr().out
    for flag in {w.split("=")[0] for w in words if w.startswith("--")}:
        assert flag in help_text, f"{line}: {flag} is not an option of kbv3 {words[0]}"


@pytest.mark.slow  # starts `kbv3 serve --device cpu` and evaluates through it
def test_the_service_snippet_runs(tmp_path, monkeypatch):
    import subprocess
    import sys
    import time

    from kernelbench_v3.serve import Evaluator

    socket_path = tmp_path / "s.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelbench_v3", "serve", "--socket", str(socket_path), "--device", "cpu"], cwd=REPO
    )
    try:
        deadline = time.monotonic() + 180
        while not socket_path.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        client = Evaluator(socket_path, timeout_s=300)
        while not client.status()["workers"][0]["ready"] and time.monotonic() < deadline:
            time.sleep(0.5)
        monkeypatch.chdir(REPO)
        block = _block("Evaluator").replace("/run/user/1000/kbv3/serve.sock", str(socket_path))
        namespace: dict = {}
        exec(compile(block, "README.md (service)", "exec"), namespace)
        assert namespace["record"].correct, namespace["record"].error
        proc.wait(timeout=60)  # the snippet's shutdown() stops the service
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_notebook_command_names_what_exists():
    """Issue 29, point 14: the README says how to run the notebook, with paths that exist; issue
    33: absolute ones (the kernel runs in notebooks/), and no --inplace (it rewrites a tracked file).
    `tests/test_notebook.py` runs the line itself."""
    line = next(line for line in README.splitlines() if "jupyter execute" in line)
    words = line.split()
    source = next(w for w in words if w.startswith("KBV3_RUNS_SOURCE="))
    assert source.startswith("KBV3_RUNS_SOURCE=$PWD/")
    assert (REPO / source.split("$PWD/", 1)[1] / "results.csv").is_file()
    notebook = next(w for w in words if w.endswith(".ipynb"))
    assert (REPO / notebook).is_file() and "--inplace" not in words
    assert any(w.startswith("--output=$PWD/out/") for w in words)
