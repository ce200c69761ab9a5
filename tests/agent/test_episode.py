"""The agent loop against a loopback OpenAI-compatible server (tests.generate.fake_openai) with
the evaluation paths replaced by test doubles (fake_evaluator), so every episode runs in well
under a second: the scripted episode, the results table, resuming, the key, the feedback path
kept apart from the judging, and the transcript as the truth of an episode."""

from __future__ import annotations

import csv
import json
import signal
import time

import pytest

from kernelbench_v3.agent.check import PUBLIC_SEEDS
from kernelbench_v3.agent.run import AgentError, run_agent
from kernelbench_v3.agent.settings import AgentSettings
from kernelbench_v3.catalog.problem import get_problem
from kernelbench_v3.evaluate import DEFAULT_SEEDS
from kernelbench_v3.generate.client import ChatClient, Reply, RetryPolicy
from kernelbench_v3.runs.load import load_runs
from kernelbench_v3.vocab import PUBLISHED_RUNS_COLUMNS
from tests.agent.fake_evaluator import FakeEvaluator
from tests.agent.scripted import ScriptedAgent, call
from tests.generate.fake_openai import FakeOpenAI

SOFTMAX = "level1/23_Softmax"
KEY = "sk-agent-3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c2e"
BROKEN = "import torch\n# WRONG: a broken kernel\nclass Model(torch.nn.Module):\n    pass\n"
GOOD = "import torch\n# a correct kernel\nclass Model(torch.nn.Module):\n    pass\n"


def settings(**changes) -> AgentSettings:
    return AgentSettings(
        **{"split": "h100", "model": "fake/agent-7b", "device": "cpu", "problems": (SOFTMAX,), **changes}
    )


def run(server, run_dir, fake, *, key=KEY, retries=0, **changes):
    client = ChatClient(server.base_url, key, timeout_s=5.0, retry=RetryPolicy(retries=retries, backoff_s=0.0))
    try:
        return run_agent(
            settings(**changes), run_dir, client, progress=False, evaluate_fn=fake.check, judge_fn=fake.judge
        )
    finally:
        client.close()


def entries(run_dir, problem=SOFTMAX) -> list[dict]:
    lines = (run_dir / "transcripts" / f"{problem}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines[1:]]


def results_rows(run_dir) -> list[dict]:
    with open(run_dir / "results.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_scripted_episode_checks_fails_fixes_checks_and_submits(tmp_path):
    agent, fake = ScriptedAgent(BROKEN, GOOD), FakeEvaluator()
    with FakeOpenAI(agent=agent) as server:
        result = run(server, tmp_path / "run", fake)
        sent = list(server.requests)

    assert [o.status for o in result.outcomes] == ["judged"]
    reference = get_problem(SOFTMAX).path.read_text()
    assert agent.answer_to(0) == reference  # read_file gave the problem file exactly
    assert agent.answer_to(1).startswith("wrote solution.py")
    broken_check, good_check = agent.answer_to(2), agent.answer_to(4)
    assert broken_check.startswith("verdict: incorrect, failed check: correctness")
    assert "max abs error: 0.5" in broken_check and "message: correctness: max abs error 0.5" in broken_check
    assert good_check.startswith("verdict: correct") and "public seeds 0, 1" in good_check
    assert "speedup: n/a" in good_check  # the CPU: no time, no speedup

    # The feedback path: two checks, public seeds; the scoring path: one judging of the
    # submitted text, with secret seeds that are neither the public nor the published ones.
    assert [c["text"] for c in fake.checks] == [BROKEN, GOOD]
    assert all(c["seeds"] == PUBLIC_SEEDS for c in fake.checks)
    (judged,) = fake.judged
    assert judged["text"] == GOOD
    secret = judged["seeds"]
    assert len(secret) == len(DEFAULT_SEEDS) and not set(secret) & set(PUBLIC_SEEDS) and secret != DEFAULT_SEEDS
    assert judged["settings"].sizes == "reduced" and judged["settings"].device == "cpu"  # eval-batch's CPU default

    # Every request offered the five tools; the first carried the problem, its source and the rules.
    assert len(sent) == 6
    for request in sent:
        names = [t["function"]["name"] for t in request["body"]["tools"]]
        assert names == ["read_file", "write_file", "edit_file", "check", "submit"]
    first = sent[0]["body"]["messages"]
    assert [m["role"] for m in first] == ["system", "user"]
    assert "# Task: level1/23_Softmax" in first[1]["content"] and reference.strip() in first[1]["content"]
    assert "## Rules (checked by the evaluator" in first[1]["content"]
    assert "public seeds 0, 1" in first[1]["content"]

    kinds = [e["kind"] for e in entries(tmp_path / "run")]
    assert kinds == ["message", "message"] + ["reply", "tool"] * 6 + ["end", "judged"]


def test_results_csv_has_the_turns_the_summed_tokens_and_the_judged_score(tmp_path):
    fake = FakeEvaluator()
    with FakeOpenAI(agent=ScriptedAgent(BROKEN, GOOD)) as server:
        run(server, tmp_path / "run", fake, price_in=1.0, price_out=2.0)
    (row,) = results_rows(tmp_path / "run")
    assert list(row) == list(PUBLISHED_RUNS_COLUMNS)
    # six responses of 100 prompt + 50 completion tokens each (the fake's usage)
    assert (row["turns"], row["total_tokens"], row["estimated_cost_usd"]) == ("6", "900", "0.0012")
    assert (row["model"], row["gpu"], row["problem"], row["correct"], row["compiled"]) == (
        "fake/agent-7b", "H100", "23_Softmax.py", "True", "True",
    )  # fmt: skip
    assert row["sol_ms"] == row["speedup"] == ""  # a CPU time is no figure
    assert row["solution_link"] == "solutions/level1/23_Softmax/sample_0.py"
    assert (tmp_path / "run" / row["solution_link"]).read_text() == GOOD
    assert (tmp_path / "run" / row["run_dir"]).is_file()
    assert (tmp_path / "run" / row["baseline_link"]).read_bytes() == get_problem(SOFTMAX).path.read_bytes()
    runs = load_runs(tmp_path / "run" / "results.csv")  # the published schema's own validation
    assert runs["turns"].tolist() == [6] and runs["problem_id"].tolist() == [SOFTMAX]
    record = json.loads((tmp_path / "run" / "records.jsonl").read_text())
    assert record["turns"] == 6 and record["total_tokens"] == 900 and record["seeds"] == list(fake.judged[0]["seeds"])


def test_the_score_is_the_judges_not_the_checks(tmp_path):
    """A solution the check calls correct but the judging finds wrong scores as incorrect."""

    class SeedSensitive(FakeEvaluator):
        def judge(self, item, settings):
            record = super().judge(item, settings)
            record.update(correct=False, status="incorrect", failed_check="correctness")
            return record

    fake = SeedSensitive()
    agent = ScriptedAgent(BROKEN, GOOD)
    with FakeOpenAI(agent=agent) as server:
        result = run(server, tmp_path / "run", fake)
    assert agent.answer_to(4).startswith("verdict: correct")
    assert results_rows(tmp_path / "run")[0]["correct"] == "False"
    assert not result.all_correct


def test_a_rerun_makes_no_request_and_no_file_holds_the_key(tmp_path):
    fake = FakeEvaluator()
    with FakeOpenAI(agent=ScriptedAgent(BROKEN, GOOD)) as server:
        run(server, tmp_path / "run", fake)
        before = (tmp_path / "run" / "results.csv").read_text()
        again = run(server, tmp_path / "run", fake)
        assert len(server.requests) == 6
        assert all(r["headers"]["Authorization"] == f"Bearer {KEY}" for r in server.requests)
    assert [o.status for o in again.outcomes] == ["already judged"]
    assert len(fake.judged) == 1 and (tmp_path / "run" / "results.csv").read_text() == before
    files = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert len(files) > 8
    for path in files:
        assert KEY.encode() not in path.read_bytes(), path


def test_ctrl_c_mid_episode_then_a_rerun_resumes_from_the_transcript(tmp_path):
    """Ctrl-C arrives while the fourth request is in flight: the run stops (KeyboardInterrupt
    from run_agent, as the CLI turns into 130) with the first three turns journaled; the rerun
    rebuilds the workspace from the transcript and sends only the missing turns."""
    fake = FakeEvaluator()
    agent = ScriptedAgent(BROKEN, GOOD)

    class CtrlC(ChatClient):
        def complete(self, messages, params, tools=None, timeout_s=None):
            if sum(m["role"] == "assistant" for m in messages) == 3:
                signal.raise_signal(signal.SIGINT)  # lands on the run's own thread, as Ctrl-C does
                time.sleep(0.3)
                return Reply("error", reason="no connection: the user pressed Ctrl-C")
            return super().complete(messages, params, tools, timeout_s)

    run_dir = tmp_path / "run"
    with FakeOpenAI(agent=agent) as server:
        client = CtrlC(server.base_url, KEY, timeout_s=5.0)
        with pytest.raises(KeyboardInterrupt):
            run_agent(settings(), run_dir, client, progress=False, evaluate_fn=fake.check, judge_fn=fake.judge)
        lock = run_dir / "transcripts" / f"{SOFTMAX}.jsonl.lock"
        deadline = time.monotonic() + 20
        while lock.exists() and time.monotonic() < deadline:  # the episode's thread closes its transcript
            time.sleep(0.05)
        assert not lock.exists() and not (run_dir / "results.csv").exists()
        assert [e["kind"] for e in entries(run_dir)][-3:] == ["reply", "tool", "failure"]
        (run_dir / "workspaces" / SOFTMAX / "solution.py").write_text("tampered between runs")
        result = run(server, run_dir, fake)
        assert len(server.requests) == 6  # 3 before, 3 after: nothing sent twice
    assert [o.status for o in result.outcomes] == ["judged"]
    assert [c["text"] for c in fake.checks] == [BROKEN, GOOD]
    assert fake.judged[0]["text"] == GOOD  # the workspace came back from the transcript, not the disk
    assert results_rows(run_dir)[0]["turns"] == "6"


def test_a_transcript_of_other_settings_is_refused_naming_the_field(tmp_path):
    fake = FakeEvaluator()
    with FakeOpenAI(agent=ScriptedAgent(BROKEN, GOOD)) as server:
        run(server, tmp_path / "run", fake)
        with pytest.raises(AgentError, match=r"max_turns: 40 then, 5 now"):
            run(server, tmp_path / "run", fake, max_turns=5)
        assert len(server.requests) == 6


def test_tool_mistakes_are_answers_and_a_response_without_tools_gets_a_nudge(tmp_path):
    steps = iter(
        [
            {"tool_calls": [{"name": "rm_rf", "arguments": "{}"}]},
            {"tool_calls": [{"name": "write_file", "arguments": "{not json"}]},
            {"tool_calls": [{"name": "edit_file", "arguments": json.dumps({"path": "solution.py"})}]},
            {"content": "Let me think about this."},
            {"tool_calls": [call("write_file", path="solution.py", content=GOOD), call("submit")]},
        ]
    )
    fake = FakeEvaluator()
    with FakeOpenAI(agent=lambda body: next(steps)) as server:
        result = run(server, tmp_path / "run", fake)
    tools = [e["result"] for e in entries(tmp_path / "run") if e["kind"] == "tool"]
    assert tools[0].startswith("error: no tool 'rm_rf'; the tools are read_file, write_file")
    assert tools[1].startswith("error: the arguments of write_file are not JSON")
    assert tools[2] == "error: edit_file needs old_str, new_str"
    nudges = [e for e in entries(tmp_path / "run") if e["kind"] == "nudge"]
    assert len(nudges) == 1 and "submit()" in nudges[0]["text"]
    assert result.outcomes[0].status == "judged" and fake.judged[0]["text"] == GOOD


@pytest.mark.slow  # a second problem's prompt traces its shapes (1-2 s on 2 cores)
def test_episodes_run_at_once_and_their_evaluations_one_at_a_time_on_the_runs_thread(tmp_path):
    import threading

    gelu = "level1/26_GELU_"
    running, overlaps, threads = [0], [0], set()

    class Watching(FakeEvaluator):
        def check(self, request):
            running[0] += 1
            overlaps[0] = max(overlaps[0], running[0])
            threads.add(threading.current_thread().name)
            time.sleep(0.05)
            running[0] -= 1
            return super().check(request)

    fake = Watching()
    with FakeOpenAI(agent=ScriptedAgent(BROKEN, GOOD)) as server:
        client = ChatClient(server.base_url, KEY, timeout_s=5.0)
        result = run_agent(
            settings(problems=(SOFTMAX, gelu)), tmp_path / "run", client, concurrency=2, progress=False,
            evaluate_fn=fake.check, judge_fn=fake.judge,
        )  # fmt: skip
        assert len(server.requests) == 12
    assert [o.problem_id for o in result.outcomes] == [SOFTMAX, gelu]
    assert [o.status for o in result.outcomes] == ["judged", "judged"]
    assert len(fake.checks) == 4 and overlaps[0] == 1 and threads == {threading.current_thread().name}
    assert [r["problem"] for r in results_rows(tmp_path / "run")] == ["23_Softmax.py", "26_GELU_.py"]


def test_prices_given_once_price_every_rewrite_of_the_results(tmp_path):
    fake = FakeEvaluator()
    with FakeOpenAI(agent=ScriptedAgent(BROKEN, GOOD)) as server:
        run(server, tmp_path / "run", fake)
        assert results_rows(tmp_path / "run")[0]["estimated_cost_usd"] == ""  # no prices: no cost
        run(server, tmp_path / "run", fake, price_in=1.0, price_out=2.0)
        assert results_rows(tmp_path / "run")[0]["estimated_cost_usd"] == "0.0012"
        run(server, tmp_path / "run", fake)  # a rerun without them keeps them
        assert results_rows(tmp_path / "run")[0]["estimated_cost_usd"] == "0.0012"
        run(server, tmp_path / "run", fake, price_in=10.0, price_out=0.0)  # new prices reprice the same tokens
        assert results_rows(tmp_path / "run")[0]["estimated_cost_usd"] == "0.006"
        assert len(server.requests) == 6
