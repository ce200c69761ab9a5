"""A whole run, model to score, offline, by the README's three commands ("Evaluate a model end
to end"): 2 problems x 2 samples against a local OpenAI-compatible server (127.0.0.1, started
here) that always answers Softmax with a correct solution and GELU with a broken one. `kbv3 generate` is SIGKILLed midway and rerun (only the missing requests are sent),
then `kbv3 eval-batch` on the CPU and `kbv3 report --json`: pass@1 is 1.0 and 0.0 for the two
problems and 0.5 for the model. The fake key the run used is in no file under RUN_DIR."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest

from kernelbench_v3.cli.main import main
from tests.generate.fake_openai import FakeOpenAI
from tests.paths import REPO

SOFTMAX, GELU = "level1/23_Softmax", "level1/26_GELU_"
KEY = "sk-e2e-7c1d9f0a2b4e6c8d0f1a3b5c7d9e1f2a"
MODEL = "local/fake-coder"


def _answers() -> dict[str, str]:
    good = (REPO / "examples" / "solutions" / "level1" / "23_Softmax.py").read_text()
    broken = (REPO / "examples" / "solutions" / "level1" / "26_GELU_.py").read_text().replace("0.5 * x", "0.25 * x")
    assert broken != (REPO / "examples" / "solutions" / "level1" / "26_GELU_.py").read_text()
    return {
        f"Task: {SOFTMAX}": f"Here is a fused kernel.\n\n```python\n{good}```\n",
        f"Task: {GELU}": f"```python\n{broken}```\nThis should be fast.",
    }


def readme_commands() -> list[list[str]]:
    """The three `kbv3` commands of the README's "Evaluate a model end to end", as argument lists."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Evaluate a model end to end", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S).group(1)
    return [shlex.split(line)[1:] for line in block.splitlines() if line.startswith("kbv3 ")]


def _with(words: list[str], **flags: str) -> list[str]:
    """`words` with each `--flag VALUE` set (replaced where present, appended where not)."""
    words = list(words)
    for name, value in flags.items():
        flag = "--" + name.replace("_", "-")
        if flag in words:
            words[words.index(flag) + 1] = value
        else:
            words += [flag, value]
    return words


def _commands(server, run) -> tuple[list[str], list[str], list[str]]:
    """The README's commands, pointed at the fake server and this test's folder: two problems,
    two samples, the key from a variable, the CPU at reduced sizes."""
    generate, evaluate, report = (
        [str(run) + w[len("runs/qwen") :] if w.startswith("runs/qwen") else w for w in words]
        for words in readme_commands()
    )
    assert [generate[0], evaluate[0], report[0]] == ["generate", "eval-batch", "report"] and "--json" in report
    generate = _with(
        generate, model=MODEL, base_url=server.base_url, samples="2", only=f"{SOFTMAX},{GELU}",
        api_key_env="KBV3_E2E_KEY", concurrency="1",
    ) + ["--no-progress"]  # fmt: skip
    evaluate = _with(evaluate, device="cpu", shapes="reduced") + ["--no-progress"]
    return generate, evaluate, report


def _journaled(run_dir) -> int:
    path = run_dir / "responses.jsonl"
    return max(0, len(path.read_text().splitlines()) - 1) if path.exists() else 0


@pytest.mark.slow  # four evaluations on the CPU and a killed subprocess
def test_generate_killed_and_rerun_then_eval_batch_then_report(tmp_path, monkeypatch, capsys):
    run = tmp_path / "run"
    monkeypatch.setenv("KBV3_E2E_KEY", KEY)
    with FakeOpenAI(_answers(), stall_s=60.0) as server:
        generate, evaluate, report = _commands(server, run)
        server.delay_after = 2  # the third request hangs: the kill lands while it is in flight
        env = dict(os.environ, PYTHONPATH=str(REPO))
        process = subprocess.Popen(
            [sys.executable, "-m", "kernelbench_v3", *generate],
            env=env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 120
            while (_journaled(run) < 2 or len(server.requests) < 3) and time.monotonic() < deadline:
                assert process.poll() is None, "generate ended before it was killed"
                time.sleep(0.1)
            assert _journaled(run) == 2 and len(server.requests) == 3
        finally:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)

        server.delay_after = None
        assert main(generate) == 0
        assert len(server.requests) == 3 + 2  # the rerun sent only the two missing requests
        records = [json.loads(line) for line in (run / "responses.jsonl").read_text().splitlines()[1:]]
        assert sorted((r["problem_id"], r["sample"]) for r in records) == [
            (SOFTMAX, 0),
            (SOFTMAX, 1),
            (GELU, 0),
            (GELU, 1),
        ]
        assert all(r["headers"]["Authorization"] == f"Bearer {KEY}" for r in server.requests)
    capsys.readouterr()

    assert main(evaluate) == 1  # the work ran and found failures: the broken GELU samples (README, Exit codes)
    assert (run / "results.parquet").is_file()
    capsys.readouterr()
    assert main(report) == 0
    report = json.loads(capsys.readouterr().out)
    from tests.cli.test_report_json import _validate

    _validate(report)  # data that follows the shipped schema (issue 33, item 3)
    (summary,) = [m for m in report["models"] if m["model"] == MODEL]  # one GPU: one summary
    assert (summary["samples"], summary["problems"], summary["pass@1"], summary["pass@2"]) == (4, 2, 0.5, 0.5)
    assert summary["fast_1@1"] is None and summary["geomean_speedup"] is None  # CPU: n/a, never 0
    by_problem = {p["problem"]: p for p in report["problems"]}
    assert by_problem[SOFTMAX]["pass@1"] == 1.0 and by_problem[GELU]["pass@1"] == 0.0

    for path in [p for p in run.rglob("*") if p.is_file()]:
        assert KEY.encode() not in path.read_bytes(), path
