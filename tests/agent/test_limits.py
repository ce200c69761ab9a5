"""How an episode ends when it does not submit, and how the endpoint's failures are kept: the
turn and time limits (the newest solution.py that imports is judged), failed requests recorded
as turns, an endpoint failing for good left for a rerun, and an endpoint without tool calls
stopping the run with one line. The evaluation paths are test doubles (fake_evaluator)."""

from __future__ import annotations

import pytest

from kernelbench_v3.agent.check import sha256_text
from kernelbench_v3.agent.episode import MAX_FAILURES_IN_ROW
from kernelbench_v3.agent.run import describe
from tests.agent.fake_evaluator import FakeEvaluator
from tests.agent.scripted import ScriptedAgent, call
from tests.agent.test_episode import BROKEN, GOOD, SOFTMAX, entries, results_rows, run
from tests.cli.test_cli_errors import no_cuda, one_line  # noqa: F401 (a fixture)
from tests.cli.test_cli_errors import run as kbv3
from tests.generate.fake_openai import FakeOpenAI

IMPORT_ERROR = "IMPORT_ERROR = 1\n"


def writes(*texts: str):
    """A model that writes each text to solution.py in turn, one per response, never submitting."""

    def agent(body):
        done = sum(m["role"] == "assistant" for m in body["messages"])
        text = texts[min(done, len(texts) - 1)]
        return {"tool_calls": [call("write_file", path="solution.py", content=text)]}

    return agent


def test_at_the_turn_limit_the_newest_solution_that_imports_is_judged(tmp_path):
    fake = FakeEvaluator()
    with FakeOpenAI(agent=writes(GOOD, IMPORT_ERROR)) as server:
        result = run(server, tmp_path / "run", fake, max_turns=2)
        assert len(server.requests) == 2
    assert [j["text"] for j in fake.judged] == [IMPORT_ERROR, GOOD]  # newest first, the import failure gives way
    judged = entries(tmp_path / "run")[-1]
    assert judged["ended"] == "turn limit" and judged["tried"] == [sha256_text(IMPORT_ERROR), sha256_text(GOOD)]
    assert results_rows(tmp_path / "run")[0]["correct"] == "True" and result.all_correct


def test_at_the_time_limit_the_episode_ends_and_is_judged(tmp_path):
    """Each response takes 100 s on the episode's clock: after the third, 300 s >= 250 s."""
    now = [0.0]
    model = writes(GOOD, BROKEN, IMPORT_ERROR)

    def slow(body):
        now[0] += 100.0
        return model(body)

    fake = FakeEvaluator()
    with FakeOpenAI(agent=slow) as server:
        from kernelbench_v3.agent.run import run_agent
        from kernelbench_v3.generate.client import ChatClient
        from tests.agent.test_episode import settings

        client = ChatClient(server.base_url, timeout_s=5.0)
        run_agent(settings(time_limit_s=250.0), tmp_path / "run", client, progress=False, clock=lambda: now[0],
                  evaluate_fn=fake.check, judge_fn=fake.judge)  # fmt: skip
        assert len(server.requests) == 3
    end = next(e for e in entries(tmp_path / "run") if e["kind"] == "end")
    assert end["reason"] == "time limit" and end["elapsed_s"] == 300.0
    assert [j["text"] for j in fake.judged] == [IMPORT_ERROR, BROKEN]  # BROKEN imports: its judging stands
    row = results_rows(tmp_path / "run")[0]
    assert (row["turns"], row["correct"], row["compiled"]) == ("3", "False", "True")


def test_a_request_may_take_no_longer_than_the_time_left(tmp_path):
    """The first response would come after 3 s; the episode has 0.5 s: the request gives up at
    the limit, is recorded, and the episode ends there."""
    fake = FakeEvaluator()
    with FakeOpenAI(agent=ScriptedAgent(BROKEN, GOOD), stall_s=3.0) as server:
        server.delay_after = 0
        result = run(server, tmp_path / "run", fake, time_limit_s=0.5)
        assert len(server.requests) == 1
    failure, end = [e for e in entries(tmp_path / "run") if e["kind"] in ("failure", "end")]
    assert failure["reason"].startswith("timeout: no complete answer within 0.")
    assert end["reason"] == "time limit" and 0.5 <= end["elapsed_s"] < 2.5
    assert result.outcomes[0].status == "judged" and [j["text"] for j in fake.judged] == [""]


def test_a_second_response_in_a_row_without_a_tool_call_ends_the_episode(tmp_path):
    replies = iter([{"tool_calls": [call("write_file", path="solution.py", content=GOOD)]}, {"content": "Done."}])
    fake = FakeEvaluator()
    with FakeOpenAI(agent=lambda body: next(replies, {"content": "I said I am done."})) as server:
        run(server, tmp_path / "run", fake)
        assert len(server.requests) == 3
    kinds = [e["kind"] for e in entries(tmp_path / "run")]
    assert kinds[2:] == ["reply", "tool", "reply", "nudge", "reply", "end", "judged"]
    assert entries(tmp_path / "run")[-2]["reason"] == "no tool call"
    assert [j["text"] for j in fake.judged] == [GOOD]


def test_failed_requests_are_recorded_turns_and_the_episode_goes_on(tmp_path):
    fake = FakeEvaluator()
    with FakeOpenAI(agent=ScriptedAgent(BROKEN, GOOD)) as server:
        server.script = ["500", "malformed"]
        result = run(server, tmp_path / "run", fake)
        assert len(server.requests) == 8
    failures = [e for e in entries(tmp_path / "run") if e["kind"] == "failure"]
    assert [f["reason"].split(":")[0] for f in failures] == ["HTTP 500 (after retries)", "malformed response"]
    assert failures[0]["http_status"] == 500
    assert result.outcomes[0].status == "judged"
    assert results_rows(tmp_path / "run")[0]["turns"] == "6"  # model responses; the failures are apart


def test_an_endpoint_failing_for_good_leaves_the_episode_for_a_rerun(tmp_path):
    fake = FakeEvaluator()
    with FakeOpenAI(agent=ScriptedAgent(BROKEN, GOOD)) as server:
        server.script = ["ok", "500", "500", "500"]
        result = run(server, tmp_path / "run", fake)
        assert [o.status for o in result.outcomes] == ["endpoint failing"]
        assert len(server.requests) == 1 + MAX_FAILURES_IN_ROW and not fake.judged
        assert "rerun the same command to continue" in describe(result) and not result.all_correct
        assert not (tmp_path / "run" / "results.csv").exists()
        result = run(server, tmp_path / "run", fake)
        assert len(server.requests) == 1 + MAX_FAILURES_IN_ROW + 5
    assert [o.status for o in result.outcomes] == ["judged"]
    assert [e["kind"] for e in entries(tmp_path / "run")].count("failure") == MAX_FAILURES_IN_ROW


def test_an_endpoint_without_tool_calls_is_one_clear_line(tmp_path, capsys):
    with FakeOpenAI(agent=ScriptedAgent(BROKEN, GOOD)) as server:
        server.script = ["notools"]
        argv = ["agent", "--split", "h100", "--model", "m", "--base-url", server.base_url, "--only", SOFTMAX]
        code, out, err = kbv3(argv + ["--device", "cpu", "--out", str(tmp_path / "run"), "--no-progress"], capsys)
        assert len(server.requests) == 1
    line = one_line(err)
    assert code == 2 and out == ""
    assert line.startswith("kbv3 agent: the endpoint does not accept tool calls (HTTP 400: ")
    assert "--enable-auto-tool-choice" in line and "kbv3 generate" in line
    assert [e["kind"] for e in entries(tmp_path / "run")] == ["message", "message", "failure"]


def test_a_refused_key_is_one_clear_line(tmp_path, capsys):
    with FakeOpenAI(agent=ScriptedAgent(BROKEN, GOOD)) as server:
        server.script = ["unauthorized"]
        argv = ["agent", "--split", "h100", "--model", "m", "--base-url", server.base_url, "--only", SOFTMAX]
        code, _, err = kbv3(argv + ["--device", "cpu", "--out", str(tmp_path / "run"), "--no-progress"], capsys)
        assert len(server.requests) == 1
    assert code == 2 and one_line(err).startswith("kbv3 agent: the endpoint refused the request (HTTP 401: ")
    assert "check the key in the variable --api-key-env names" in err


def test_a_conversation_longer_than_the_context_ends_the_episode(tmp_path):
    fake = FakeEvaluator()
    with FakeOpenAI(agent=writes(GOOD)) as server:
        server.script = ["ok", "toolong"]
        result = run(server, tmp_path / "run", fake)
        assert len(server.requests) == 2
    end = next(e for e in entries(tmp_path / "run") if e["kind"] == "end")
    assert end["reason"] == "context full" and result.outcomes[0].status == "judged"
    assert [j["text"] for j in fake.judged] == [GOOD]


@pytest.mark.parametrize(
    "extra, expected",
    [
        (["--price-in", "3"], "kbv3 agent: argument --price-out: needed with --price-in"),
        (["--price-out", "-1"], "kbv3 agent: argument --price-out: must be a number >= 0, got -1"),
        (["--max-turns", "0"], "kbv3 agent: argument --max-turns: must be at least 1, got 0"),
        (
            ["--only", "level1/23_Softmx"],
            "argument --only: not problems of split h100: level1/23_Softmx (did you mean level1/23_Softmax",
        ),
        (["--base-url", "localhost:8000"], "kbv3 agent: argument --base-url: 'localhost:8000' is not an http(s) URL"),
        (["--api-key-env", "KBV3_NO_SUCH_VARIABLE"], "environment variable KBV3_NO_SUCH_VARIABLE is not set"),
    ],
)
def test_usage_mistakes_are_one_line_before_anything_is_sent(extra, expected, tmp_path, capsys):
    argv = ["agent", "--split", "h100", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--device", "cpu"]
    code, _, err = kbv3(argv + ["--out", str(tmp_path / "run")] + extra, capsys)
    assert code == 2 and expected in one_line(err)
    assert not (tmp_path / "run" / "transcripts").exists()


def test_cuda_asked_for_without_a_gpu(no_cuda, tmp_path, capsys):  # noqa: F811
    argv = ["agent", "--split", "h100", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--device", "cuda"]
    code, _, err = kbv3(argv + ["--out", str(tmp_path / "run")], capsys)
    assert code == 2 and "no CUDA GPU is visible" in one_line(err)


def test_on_the_cpu_a_problem_that_cannot_run_there_is_skipped_and_listed(tmp_path):
    from kernelbench_v3.catalog.problem import get_problem

    source = get_problem(SOFTMAX).path.read_text()
    (tmp_path / "problems" / "level1").mkdir(parents=True)
    (tmp_path / "problems" / "level1" / "23_Softmax.py").write_text(
        source + '\nCPU_UNSUPPORTED = "no CPU kernel for this op"\n'
    )
    fake = FakeEvaluator()
    with FakeOpenAI(agent=ScriptedAgent(BROKEN, GOOD)) as server:
        result = run(server, tmp_path / "run", fake, problems_root=str(tmp_path / "problems"))
        assert server.requests == []
    assert result.outcomes == [] and [o.problem_id for o in result.skipped] == [SOFTMAX]
    assert "level1/23_Softmax: skipped, cannot run on the CPU: no CPU kernel for this op" in describe(result)


def test_a_check_asked_for_after_the_time_limit_is_not_run(tmp_path):
    """One response asks for three checks; each takes 100 s on the episode's clock, the limit is
    150 s: two run, the third is answered as not run and the episode ends there."""
    from kernelbench_v3.agent.run import run_agent
    from kernelbench_v3.generate.client import ChatClient
    from tests.agent.test_episode import settings

    now = [0.0]

    class Slow(FakeEvaluator):
        def check(self, request):
            now[0] += 100.0
            return super().check(request)

    first = {"tool_calls": [call("write_file", path="solution.py", content=GOOD)] + [call("check")] * 3}
    fake = Slow()
    with FakeOpenAI(agent=lambda body: first) as server:
        client = ChatClient(server.base_url, timeout_s=5.0)
        run_agent(settings(time_limit_s=150.0), tmp_path / "run", client, progress=False, clock=lambda: now[0],
                  evaluate_fn=fake.check, judge_fn=fake.judge)  # fmt: skip
        assert len(server.requests) == 1
    tools = [e["result"] for e in entries(tmp_path / "run") if e["kind"] == "tool"]
    assert len(fake.checks) == 2 and tools[-1] == "not run: the episode's time limit is reached"
    assert next(e for e in entries(tmp_path / "run") if e["kind"] == "end")["reason"] == "time limit"


def test_building_the_command_line_imports_no_torch_httpx_or_jinja2():
    """`kbv3 --help` and every verb's parser stay quick: the agent verb reads its defaults from a
    module that imports none of the heavy libraries (a fresh interpreter, so nothing is cached)."""
    import subprocess
    import sys

    from tests.paths import REPO

    code = (
        "import sys; from kernelbench_v3.cli.main import build_parser; build_parser(); "
        "print(sorted(m for m in ('torch', 'httpx', 'jinja2') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
