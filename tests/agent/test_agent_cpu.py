"""`kbv3 agent` as the README shows it ("The agent loop"), on the CPU at reduced sizes, with the
real evaluator on both paths: a scripted fake agent on a loopback server reads reference.py,
writes a broken Softmax, checks it and sees the failure, writes the bundled correct one, checks
it and sees it correct, and submits. The judging is the trusted evaluator's, with secret seeds;
`kbv3 report` and `kbv3 runs summary` read the run folder; a rerun sends nothing; the key the
run used is in no file. (Three CPU evaluations: about 15 s.)"""

from __future__ import annotations

import csv
import json
import re
import shlex

import pytest

from kernelbench_v3.agent.check import PUBLIC_SEEDS
from kernelbench_v3.cli.main import main
from tests.agent.scripted import ScriptedAgent
from tests.generate.fake_openai import FakeOpenAI
from tests.generate.test_end_to_end import _with
from tests.paths import REPO

SOFTMAX = "level1/23_Softmax"
KEY = "sk-agent-e2e-5d1c8b0a6e4f2d9c7b5a3e1f0d8c6b4a"


def readme_commands() -> list[list[str]]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## The agent loop", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S).group(1)
    return [shlex.split(line)[1:] for line in block.splitlines() if line.startswith("kbv3 ")]


@pytest.mark.slow  # three evaluations on the CPU
def test_kbv3_agent_on_the_cpu_as_the_readme_shows_it(tmp_path, monkeypatch, capsys):
    good = (REPO / "examples" / "solutions" / "level1" / "23_Softmax.py").read_text()
    broken = good.replace("tl.exp(x - row_max) / row_sum", "tl.exp(x - row_max) / (2.0 * row_sum)")
    assert broken != good
    run = tmp_path / "agent"
    agent_words, report_words, summary_words = (
        [str(run) + w[len("runs/agent") :] if w.startswith("runs/agent") else w for w in words]
        for words in readme_commands()
    )
    assert [agent_words[0], report_words[0], summary_words[:2]] == ["agent", "report", ["runs", "summary"]]
    assert "--device" in agent_words and agent_words[agent_words.index("--device") + 1] == "cpu"
    monkeypatch.setenv("KBV3_AGENT_E2E_KEY", KEY)
    agent = ScriptedAgent(broken, good)
    with FakeOpenAI(agent=agent) as server:
        argv = _with(agent_words, base_url=server.base_url, only=SOFTMAX, api_key_env="KBV3_AGENT_E2E_KEY")
        assert main(argv + ["--no-progress", "--price-in", "3", "--price-out", "15"]) == 0
        assert len(server.requests) == 6
        assert all(r["headers"]["Authorization"] == f"Bearer {KEY}" for r in server.requests)
        out = capsys.readouterr().out
        assert "level1/23_Softmax: correct after 6 turns, 900 tokens (submitted)" in out

        broken_check, good_check = agent.answer_to(2), agent.answer_to(4)
        assert broken_check.startswith("verdict: incorrect, failed check: correctness"), broken_check
        assert "message: seed0: max abs error" in broken_check and "max abs error: " in broken_check
        assert good_check.startswith("verdict: correct"), good_check

        assert main(argv + ["--no-progress"]) == 0  # the rerun: nothing to send
        assert len(server.requests) == 6
    capsys.readouterr()

    judged = json.loads((run / "transcripts" / f"{SOFTMAX}.jsonl").read_text().splitlines()[-1])
    assert judged["kind"] == "judged" and judged["ended"] == "submitted"
    record = judged["record"]
    assert record["correct"] and record["status"] == "correct" and record["device"] == "cpu"
    assert len(record["seeds"]) == 5 and not set(record["seeds"]) & set(PUBLIC_SEEDS)  # the secret ones
    assert record["timing_method"] == "supervisor_calls_cpu"  # judged with timing, as eval-batch does

    with open(run / "results.csv", newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    assert (row["model"], row["gpu"], row["problem"], row["correct"]) == (
        "Qwen/Qwen2.5-Coder-32B-Instruct", "H100", "23_Softmax.py", "True",
    )  # fmt: skip
    # 600 prompt tokens at 3 USD and 300 completion tokens at 15 USD per million
    assert (row["turns"], row["total_tokens"], row["estimated_cost_usd"]) == ("6", "900", "0.0063")
    assert (run / row["solution_link"]).read_text() == good

    assert main(report_words + ["--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (model,) = [m for m in report["models"] if m["model"] == "Qwen/Qwen2.5-Coder-32B-Instruct"]
    assert model["gpu"] == "H100" and model["pass@1"] == 1.0
    assert main(summary_words) == 0
    assert "1/54" in capsys.readouterr().out

    for path in [p for p in run.rglob("*") if p.is_file()]:
        assert KEY.encode() not in path.read_bytes(), path


def _replies(path) -> int:
    if not path.exists():
        return 0
    return sum('"kind": "reply"' in line for line in path.read_text().splitlines())


@pytest.mark.slow  # a kbv3 process started, interrupted and run again
def test_ctrl_c_exits_130_and_the_same_command_finishes_the_run(tmp_path, capsys):
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.agent.scripted import call

    def reads_then_submits(body):
        done = sum(m["role"] == "assistant" for m in body["messages"])
        return {"tool_calls": [call("read_file", path="README.md") if done < 3 else call("submit")]}

    run = tmp_path / "agent"
    transcript = run / "transcripts" / f"{SOFTMAX}.jsonl"
    with FakeOpenAI(agent=reads_then_submits, stall_s=60.0) as server:
        server.delay_after = 2  # the third request hangs: Ctrl-C lands while it is in flight
        argv = ["agent", "--split", "h100", "--model", "m", "--base-url", server.base_url, "--only", SOFTMAX]
        argv += ["--device", "cpu", "--out", str(run), "--no-progress"]
        process = subprocess.Popen(
            [sys.executable, "-m", "kernelbench_v3", *argv],
            env=dict(os.environ, PYTHONPATH=str(REPO)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 120
            while (_replies(transcript) < 2 or len(server.requests) < 3) and time.monotonic() < deadline:
                assert process.poll() is None, process.communicate()
                time.sleep(0.05)
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=60)
        finally:
            process.kill()
        assert process.returncode == 130, err
        assert "kbv3 agent: interrupted; every step so far is in RUN_DIR/transcripts/" in err and "Traceback" not in err
        assert _replies(transcript) == 2

        server.delay_after = None
        assert main(argv) == 1  # finished: the empty solution.py was submitted, and fails its import
        assert len(server.requests) == 3 + 2  # the hung request again, then submit()
    assert "level1/23_Softmax: failed (import) after 4 turns" in capsys.readouterr().out
