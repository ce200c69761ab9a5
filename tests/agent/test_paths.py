"""The two evaluation paths' settings and wording, without evaluating: what `check()` asks the
evaluator for on each device and how it answers, what a judging asks for (eval-batch's settings,
secret seeds), and which version a judging at a limit takes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelbench_v3.agent.check import CHECK_TIMING_S, PUBLIC_SEEDS, CheckSettings, describe_check
from kernelbench_v3.agent.judge import MAX_TRIED, JudgeSettings, judge_episode, secret_seeds
from kernelbench_v3.evaluate import DEFAULT_SEEDS, EvalOptions, Record
from tests.agent.fake_evaluator import FakeEvaluator


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_a_check_asks_for_public_seeds_and_times_only_on_cuda(device):
    request = CheckSettings("h100", device, model="m").request("level1/23_Softmax", Path("/x/sol.py"))
    assert request.seeds == PUBLIC_SEEDS and request.device == device and request.gpu == "h100"
    assert request.time_solution is (device == "cuda") and request.wants_baseline is (device == "cuda")
    assert request.timing_seconds == (CHECK_TIMING_S if device == "cuda" else None)
    assert request.sizes == ()  # the problem's sizes on CUDA, its reduced ones on the CPU (the evaluator's rule)


def test_a_timed_check_on_cuda_says_the_time_and_the_speedup():
    record = Record(status="correct", correct=True, compiled=True, seeds=[0, 1], sol_ms=0.01234, speedup=1.91)
    record.checks = {"correctness": "pass", "stress": "pass", "custom_kernel": "pass"}
    text = describe_check(record, "cuda")
    assert text.splitlines()[0] == "verdict: correct (3 checks passed on the public seeds 0, 1)"
    assert "time: 0.01234 ms (short timing), speedup: 1.91x" in text
    record.speedup, record.baseline_error = None, "baseline timing failed: out of memory"
    assert "speedup: n/a (baseline timing failed: out of memory)" in describe_check(record, "cuda")


def test_a_failure_message_is_cut_to_a_few_lines():
    record = Record(status="failed", seeds=[0, 1])
    record.fail("failed", "x" * 5000, "import")
    text = describe_check(record, "cpu")
    assert text.startswith("verdict: failed, failed check: import\nmessage: xxx")
    assert len(text) < 2000 and "[...]" in text


@pytest.mark.parametrize("device, sizes", [("cuda", "default"), ("cpu", "reduced")])
def test_a_judging_is_eval_batchs_with_secret_seeds(device, sizes):
    options = EvalOptions(kernel_rule="v3")
    batch = JudgeSettings("h100", device, "m", options=options).batch_settings((7, 8, 9))
    assert (batch.split, batch.device, batch.sizes) == ("h100", device, sizes)
    assert batch.options == EvalOptions(kernel_rule="v3", seeds=(7, 8, 9))  # every other option kept


def test_secret_seeds_are_fresh_and_never_public():
    draws = [secret_seeds() for _ in range(50)]
    assert all(len(set(d)) == len(DEFAULT_SEEDS) and not set(d) & set(PUBLIC_SEEDS) for d in draws)
    assert len(set(draws)) == 50


def test_at_a_limit_empty_files_are_skipped_and_at_most_a_few_versions_judged(tmp_path):
    fake = FakeEvaluator()
    settings = JudgeSettings("h100", "cpu", "m")
    broken = [f"IMPORT_ERROR = {i}\n" for i in range(5)]
    judged = judge_episode("level1/23_Softmax", "H100", ["", *broken, ""], False, tmp_path, settings, fake.judge)
    assert [j["text"] for j in fake.judged] == broken[:MAX_TRIED]
    assert judged.text == broken[0] and len(judged.tried) == MAX_TRIED  # none imports: the newest stands
    fake.judged.clear()
    judged = judge_episode("level1/23_Softmax", "H100", [""], False, tmp_path, settings, fake.judge)
    assert [j["text"] for j in fake.judged] == [""] and judged.record["failed_check"] == "import"
    fake.judged.clear()
    judged = judge_episode("level1/23_Softmax", "H100", ["WRONG", "good"], True, tmp_path, settings, fake.judge)
    assert [j["text"] for j in fake.judged] == ["WRONG"]  # submitted: exactly that file, whatever it scores
