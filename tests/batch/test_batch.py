"""Batch evaluation: solution discovery, the durable journal, the work order, the executors.

The machinery tests run in well under a second each. The batch tests run the real evaluator on
CPU over small problems at reduced sizes: a batch of honest, cheating, crashing and hanging
solutions is started as `kbv3 eval-batch`, SIGKILLed (with its whole process group) after a few
records are journaled while an evaluation is running (no evaluator process may outlive it), and
rerun; every record must then be there exactly once with the right
verdict. The Ray executor (in-process, CPU) must give the same verdicts as the local one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelbench_v3.batch.items import failure_record
from kernelbench_v3.batch.journal import Journal, JournalError, latest_records, read_journal
from kernelbench_v3.batch.run import (
    BatchError,
    BatchItem,
    BatchSettings,
    WorkQueue,
    discover_solutions,
    read_results,
    run_batch,
    write_parquet,
)
from kernelbench_v3.evaluate.options import EvalOptions
from tests.paths import PROBLEMS, REPO

pytestmark = pytest.mark.slow  # evaluations in child processes


# ----------------------------------------------------------------------------- discovery


def _touch(path: Path, text: str = "class Model: pass\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_runs_layout_names_resolve_with_underscores_hyphens_and_gpu_tokens(tmp_path):
    _touch(tmp_path / "claude-opus-4_H100_40_LayerNorm.py.txt")
    _touch(tmp_path / "my_odd_model_H100_1_Square_matrix_multiplication_.py.txt")
    # A GPU token inside the model name: only the split that leaves a real problem counts.
    _touch(tmp_path / "gpt_B200_tuned_H100_23_Softmax.py.txt")
    _touch(tmp_path / "GPT-5.4_B200_23_Softmax.py.txt")  # another GPU: skipped
    _touch(tmp_path / "GPT-5.4_H100_bloom.py.txt")  # graphics is not in h100: skipped
    found = discover_solutions(tmp_path, "h100", PROBLEMS)
    got = {(it.model, it.gpu, it.problem_id) for it in found.items}
    assert got == {
        ("claude-opus-4", "H100", "level1/40_LayerNorm"),
        ("my_odd_model", "H100", "level1/1_Square_matrix_multiplication_"),
        ("gpt_B200_tuned", "H100", "level1/23_Softmax"),
    }
    reasons = sorted(s.reason for s in found.skipped)
    assert reasons == ["graphics/bloom is not in split h100", "solution for B200, batch is for H100"]
    # batch order follows the catalog (level1/1 before 23 before 40)
    assert [it.problem_id for it in found.items] == [
        "level1/1_Square_matrix_multiplication_",
        "level1/23_Softmax",
        "level1/40_LayerNorm",
    ]


def test_problems_layout_and_unknown_files_are_errors_naming_them(tmp_path):
    folder = tmp_path / "agent-x"
    _touch(folder / "level1" / "40_LayerNorm.py")
    _touch(folder / "graphics" / "bloom.py")
    found = discover_solutions(folder, "h100", PROBLEMS)
    assert [(it.model, it.problem_id) for it in found.items] == [("agent-x", "level1/40_LayerNorm")]
    assert (
        found.items[0].solution_sha256
        == __import__("hashlib").sha256((folder / "level1" / "40_LayerNorm.py").read_bytes()).hexdigest()
    )
    assert discover_solutions(folder, "h100", PROBLEMS, model="m").items[0].model == "m"

    _touch(folder / "level1" / "40_LayerNrom.py")
    _touch(tmp_path / "agent-x" / "someone_H100_no_such_problem.py.txt")
    with pytest.raises(BatchError) as info:
        discover_solutions(folder, "h100", PROBLEMS)
    assert "40_LayerNrom.py" in str(info.value) and "no_such_problem" in str(info.value)
    with pytest.raises(BatchError, match="no solutions"):
        discover_solutions(_touch(tmp_path / "empty" / "README.md").parent, "h100", PROBLEMS)


# ----------------------------------------------------------------------------- journal


SETTINGS = BatchSettings(
    split="h100", device="cpu", sizes="reduced", problems_root=str(PROBLEMS), options=EvalOptions(timeout_s=5.0)
)


def _item(problem: str, model: str = "m", sha: str = "0" * 64) -> BatchItem:
    return BatchItem(model, "H100", problem, f"/x/{problem}.py", sha)


def _record(item: BatchItem, status: str = "correct", **extra) -> dict:
    record = failure_record(item, SETTINGS, "placeholder")
    record.update(status=status, error=None, correct=status == "correct", **extra)
    return record


def test_journal_is_durable_line_by_line_and_repairs_a_torn_tail(tmp_path):
    path = tmp_path / "j.jsonl"
    first, second = _item("level1/23_Softmax"), _item("level1/26_GELU_")
    with Journal(path, SETTINGS) as journal:
        journal.append(_record(first))
    # a kill in the middle of a write leaves half a line behind
    with open(path, "ab") as f:
        f.write(b'{"model": "m", "gpu": "H1')
    header, records, _ = read_journal(path)
    assert header["settings"]["sizes"] == "reduced" and len(records) == 1
    with Journal(path, SETTINGS) as journal:
        assert [r["problem_id"] for r in journal.existing] == ["level1/23_Softmax"]
        journal.append(_record(second))
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line) for line in lines)

    # corruption anywhere but the tail is reported with its line number
    path.write_text(lines[0] + "\nnot json\n" + lines[2] + "\n")
    with pytest.raises(JournalError, match=r"j.jsonl:2: corrupt"):
        read_journal(path)


def test_journal_refuses_other_settings_and_a_second_writer(tmp_path):
    path = tmp_path / "j.jsonl"
    with Journal(path, SETTINGS):
        with pytest.raises(JournalError, match="in use by another running batch"):
            Journal(path, SETTINGS).open()
    other = BatchSettings(
        split="h100", device="cpu", sizes="default", problems_root=str(PROBLEMS), options=EvalOptions(timeout_s=5.0)
    )
    with pytest.raises(JournalError, match="other settings.*sizes"):
        Journal(path, other).open()
    Journal(path, SETTINGS).open()  # the refused attempts released the lock

    # run_batch reports an unusable journal as a batch that cannot start (the CLI prints it)
    folder = tmp_path / "solutions"
    _touch(folder / "level1" / "23_Softmax.py")
    with Journal(path, SETTINGS):
        with pytest.raises(BatchError, match="in use by another running batch"):
            run_batch(folder, tmp_path / "out.parquet", SETTINGS, journal=path, progress=False)


def test_parquet_round_trip_and_last_record_per_key_wins(tmp_path):
    item = _item("level1/40_LayerNorm")
    records = [
        _record(item, "error"),
        _record(item, "correct", checks={"shape": "pass"}, sizes={"dim1": 16}, ref_ms=1.5),
        _record(_item("level1/23_Softmax"), "incorrect", checks={"values": "fail"}),
    ]
    latest = latest_records(records)
    assert len(latest) == 2 and latest[item.key]["status"] == "correct"
    write_parquet(latest.values(), tmp_path / "r.parquet")
    back = {(r["problem_id"]): r for r in read_results(tmp_path / "r.parquet")}
    assert back["level1/40_LayerNorm"]["checks"] == {"shape": "pass"}
    assert back["level1/40_LayerNorm"]["sizes"] == {"dim1": 16}
    assert back["level1/40_LayerNorm"]["ref_ms"] == 1.5
    assert back["level1/23_Softmax"]["speedup"] is None


def test_parquet_keeps_the_phases_in_the_order_they_ran(tmp_path):
    phases = {"setup": 0.1, "reference": 1.0, "solution_zygote_wait": 0.5, "candidate": 0.5, "bookkeeping": 0.0}
    wall = {"cli_import": 0.1, "zygote_launch": 0.0, "reference": 1.0, "unattributed": 0.0}
    record = _record(_item("level1/23_Softmax"), "correct", phase_s=phases, wall_phase_s=wall)
    write_parquet([record], tmp_path / "r.parquet")
    (back,) = read_results(tmp_path / "r.parquet")
    assert list(back["phase_s"]) == list(phases) and list(back["wall_phase_s"]) == list(wall)


# ----------------------------------------------------------------------------- work order


def test_work_queue_builds_each_baseline_once_before_sharing_it():
    a1, a2, b1 = _item("level1/23_Softmax", "m1"), _item("level1/23_Softmax", "m2"), _item("level1/26_GELU_", "m1")
    queue = WorkQueue([a1, a2, b1])
    assert queue.take() == a1
    assert queue.take() == b1  # a2 waits: a1 is building the Softmax baseline
    assert queue.take() is None and not queue.finished()
    queue.finish(a1, {"baseline_ms": 2.0})
    assert queue.take() == a2
    queue.finish(a2, {})
    queue.finish(b1, {})
    assert queue.finished()

    # a first evaluation whose baseline failed does not serialize the rest of its problem
    queue = WorkQueue([a1, a2, _item("level1/23_Softmax", "m3")])
    queue.take()
    queue.finish(a1, {"baseline_ms": None, "timing_flags": ["baseline_failed"]})
    assert queue.take() == a2 and queue.take() is not None
    # problems whose baseline a previous run already built start in parallel
    queue = WorkQueue([a1, a2], warm=[("level1/23_Softmax", "H100")])
    assert [queue.take(), queue.take()] == [a1, a2]


# ----------------------------------------------------------------------------- worker failures


def fake_evaluate(item: BatchItem, settings: BatchSettings) -> dict:
    """Stands in for the evaluator where the evaluator itself is what fails."""
    text = Path(item.solution_path).read_text()
    if "EXIT" in text:
        os._exit(3)  # the worker process dies
    if "STALL" in text:
        time.sleep(600)  # the evaluator hangs past the batch watchdog
    if "RAISE" in text:
        raise RuntimeError("evaluator bug")
    return _record(
        item, "correct", ref_ms=1.0, baseline_ms=1.0, log_tail=os.environ.get("CUDA_VISIBLE_DEVICES", "unset")
    )


def test_dead_stuck_or_raising_evaluator_costs_only_its_own_record(tmp_path, monkeypatch):
    from kernelbench_v3 import workers

    monkeypatch.setattr(workers, "WATCHDOG_SLACK_S", 3.0)
    folder = tmp_path / "fake"
    _touch(folder / "level1" / "23_Softmax.py", "EXIT")
    _touch(folder / "level1" / "26_GELU_.py", "STALL")
    _touch(folder / "level1" / "36_RMSNorm_.py", "RAISE")
    for name in ("40_LayerNorm", "42_Max_Pooling_2D", "47_Sum_reduction_over_a_dimension"):
        _touch(folder / "level1" / f"{name}.py", "fine")
    settings = BatchSettings(
        split="h100", device="cpu", problems_root=str(PROBLEMS), options=EvalOptions(timeout_s=0.5)
    )
    result = run_batch(folder, tmp_path / "out.parquet", settings, workers=2, evaluate_fn=fake_evaluate, progress=False)
    by_problem = {r["problem_id"].split("/")[1]: r for r in result.records}
    assert "died (exit code 3)" in by_problem["23_Softmax"]["error"]
    assert "watchdog" in by_problem["26_GELU_"]["error"]
    assert "evaluator raised" in by_problem["36_RMSNorm_"]["error"]
    assert {r["status"] for k, r in by_problem.items() if k not in ("23_Softmax", "26_GELU_", "36_RMSNorm_")} == {
        "correct"
    }
    assert all(r["log_tail"] == "" for r in result.records if r["status"] == "correct")  # CPU: no GPU
    assert len(read_results(tmp_path / "out.parquet")) == 6

    # --retry-errors reruns exactly the three error records; the Parquet keeps one per key
    again = run_batch(
        folder,
        tmp_path / "out.parquet",
        settings,
        workers=2,
        evaluate_fn=fake_evaluate,
        progress=False,
        retry_errors=True,
    )
    assert again.ran == 3 and again.already_done == 3
    assert len(read_journal(tmp_path / "out.parquet.journal.jsonl")[1]) == 9
    assert len(read_results(tmp_path / "out.parquet")) == 6


class _LostCuda:
    """A stand-in `torch` whose CUDA context has a sticky error, as after an MPS client's fault."""

    class cuda:  # noqa: N801 - mirrors torch.cuda
        @staticmethod
        def is_initialized() -> bool:
            return True

        @staticmethod
        def synchronize() -> None:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")


def faulting_evaluate(item: BatchItem, settings: BatchSettings) -> dict:
    """The record says which worker process made it; a FAULT file leaves the context lost."""
    import sys

    if "FAULT" in Path(item.solution_path).read_text():
        sys.modules["torch"] = _LostCuda  # what the worker's health check will find
    return _record(item, "correct", ref_ms=1.0, baseline_ms=1.0, log_tail=str(os.getpid()))


@pytest.mark.slow
def test_a_worker_whose_cuda_context_is_lost_is_replaced_after_its_record(tmp_path):
    folder = tmp_path / "fake"
    _touch(folder / "level1" / "23_Softmax.py", "FAULT")
    for name in ("26_GELU_", "36_RMSNorm_"):
        _touch(folder / "level1" / f"{name}.py", "fine")
    settings = BatchSettings(split="h100", device="cpu", problems_root=str(PROBLEMS), options=EvalOptions())
    result = run_batch(
        folder, tmp_path / "out.parquet", settings, workers=1, evaluate_fn=faulting_evaluate, progress=False
    )
    by_problem = {r["problem_id"].split("/")[1]: r for r in result.records}
    assert {r["status"] for r in by_problem.values()} == {"correct"}  # the faulting item keeps its record
    faulted = by_problem["23_Softmax"]["log_tail"]
    others = {by_problem[name]["log_tail"] for name in ("26_GELU_", "36_RMSNorm_")}
    assert faulted not in others  # no item after the fault ran in the lost worker


# ----------------------------------------------------------------------------- real CPU batches
#
# 20 solutions for two small problems (reduced sizes), in the runs dataset's layout so several
# models can solve the same problem: honest Triton kernels, a torch-only copy of the reference,
# a wrong kernel, cheats (input mutation, monkeypatching torch), crashes (raise, os._exit,
# syntax error) and a hang.

TRITON_HEADER = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"

GELU_KERNEL = (
    TRITON_HEADER
    + """

@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = {formula}
    tl.store(y_ptr + offs, y, mask=mask)


class Model(nn.Module):
    def forward(self, x):
        {before}
        x = x.contiguous()
        y = torch.empty_like(x)
        gelu_kernel[(triton.cdiv(x.numel(), {block}),)](x, y, x.numel(), BLOCK={block})
        return y
"""
)
GELU_EXACT = "0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))"

SOFTMAX_KERNEL = (
    TRITON_HEADER
    + """

@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    y = {formula}
    tl.store(y_ptr + row * n_cols + cols, y, mask=mask)


class Model(nn.Module):
    def forward(self, x):
        {before}
        x = x.contiguous()
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]), num_warps={warps})
        return y
"""
)
SOFTMAX_EXACT = "e / tl.sum(e, axis=0)"


def _gelu(formula=GELU_EXACT, before="pass", block=256):
    return GELU_KERNEL.format(formula=formula, before=before, block=block)


def _softmax(formula=SOFTMAX_EXACT, before="pass", warps=4):
    return SOFTMAX_KERNEL.format(formula=formula, before=before, warps=warps)


TORCH_ONLY = {
    "26_GELU_": "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
    "    def forward(self, x):\n        return torch.nn.functional.gelu(x)\n",
    "23_Softmax": "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
    "    def forward(self, x):\n        return torch.softmax(x, dim=1)\n",
}
# A cheat that swaps the reference's own op for its kernel, hoping the check compares a patched
# reference with itself.
PATCH_GELU = _gelu().replace("class Model", "torch.nn.functional.gelu = lambda x, *a, **k: x * 0\n\n\nclass Model")

# (model, problem stem) -> (source, expected kind)
CASES: dict[tuple[str, str], tuple[str, str]] = {
    **{(f"honest-b{b}", "26_GELU_"): (_gelu(block=b), "correct") for b in (128, 256, 512)},
    **{(f"honest-w{w}", "23_Softmax"): (_softmax(warps=w), "correct") for w in (1, 2, 4)},
    ("torch-only", "26_GELU_"): (TORCH_ONLY["26_GELU_"], "rejected"),
    ("torch-only", "23_Softmax"): (TORCH_ONLY["23_Softmax"], "rejected"),
    ("wrong", "26_GELU_"): (_gelu(formula="x * 0.5"), "rejected"),
    ("wrong", "23_Softmax"): (_softmax(formula="e"), "rejected"),
    ("mutates-input", "23_Softmax"): (_softmax(before="x.mul_(0.5)"), "rejected"),
    ("patches_torch", "26_GELU_"): (PATCH_GELU, "rejected"),
    ("raises", "26_GELU_"): (_gelu(before="raise RuntimeError('kernel launch failed')"), "crash"),
    ("raises", "23_Softmax"): (_softmax(before="raise RuntimeError('kernel launch failed')"), "crash"),
    ("exits", "26_GELU_"): (_gelu(before="import os; os._exit(7)"), "crash"),
    ("exits", "23_Softmax"): (_softmax(before="import os; os._exit(7)"), "crash"),
    ("syntax-error", "26_GELU_"): (_gelu().replace("def forward(self, x):", "def forward(self, x)"), "crash"),
    ("syntax-error", "23_Softmax"): (_softmax().replace("return y", "return y)"), "crash"),
    ("segfaults", "23_Softmax"): (_softmax(before="import ctypes; ctypes.string_at(0)"), "crash"),
    ("hangs", "26_GELU_"): (_gelu(before="while True: pass"), "hang"),
}
# Per child process. An honest child needs a few seconds on an idle 2-core machine, but an honest
# candidate was seen timing out at 30 s under a load average of ~10 (a record turned "failed"; a
# reference timing out turns one into "error"). The hang pays all of it, on one worker, while the
# other keeps evaluating.
TIMEOUT_S = 90.0
KILL_AFTER = 5  # records journaled before the batch is SIGKILLed


def _build_runs_folder(folder: Path, cases=CASES) -> None:
    for (model, stem), (source, _) in cases.items():
        _touch(folder / f"{model}_H100_{stem}.py.txt", source)


def _command(solutions: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "kernelbench_v3",
        "eval-batch",
        str(solutions),
        "--split",
        "h100",
        "--out",
        str(out),
        "--device",
        "cpu",
        "--workers",
        "2",
        "--shapes",
        "reduced",
        "--timeout",
        str(TIMEOUT_S),
        "--problems",
        str(PROBLEMS),
        "--no-progress",
        "--seeds",
        "42",
        "--no-other-shape",
        "--no-baseline",
    ]  # the batch is under test


EVALUATOR_CHILD = "kernelbench_v3.evaluate.solution.zygote"  # the zygote and the solution processes it forks


def _batch_processes(cache_dir: str) -> dict[int, str]:
    """Live processes of the batch under test (the batch, its workers, the evaluator's children),
    recognised by the KBV3_CACHE_DIR they inherited: pid -> command line."""
    marker = f"KBV3_CACHE_DIR={cache_dir}".encode()
    found = {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if marker in (proc / "environ").read_bytes().split(b"\0"):  # empty for zombies
                found[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, UnicodeDecodeError):
            continue
    return found


@pytest.fixture(scope="module")
def batch_env(tmp_path_factory):
    root = tmp_path_factory.mktemp("batch")
    env = dict(
        os.environ,
        KBV3_CACHE_DIR=str(root / "cache"),
        KBV3_MODULE_DIR=str(root / "modules"),
        TRITON_CACHE_DIR=str(root / "triton"),
        PYTHONPATH=str(REPO),
    )
    return root, env


@pytest.fixture(scope="module")
def killed_and_resumed(batch_env):
    """Run the 20-solution batch, SIGKILL it after KILL_AFTER records, rerun it to the end."""
    root, env = batch_env
    solutions, out = root / "solutions", root / "results.parquet"
    journal = root / "results.parquet.journal.jsonl"
    _build_runs_folder(solutions)
    process = subprocess.Popen(
        _command(solutions, out), env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    cache = env["KBV3_CACHE_DIR"]
    in_flight: list[str] = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        # Kill while an evaluator child runs, so the kill also tests that none outlives it.
        in_flight = [cmd for cmd in _batch_processes(cache).values() if EVALUATOR_CHILD in cmd]
        if len(read_journal(journal)[1]) >= KILL_AFTER and in_flight:
            break
        time.sleep(0.2)
    # The batch and its workers share the batch's process group; the evaluator's children run in
    # sessions of their own and must die with their parent worker (PR_SET_PDEATHSIG).
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    survivors = _batch_processes(cache)
    gone_by = time.monotonic() + 10
    while survivors and time.monotonic() < gone_by:
        time.sleep(0.2)
        survivors = _batch_processes(cache)
    for pid in survivors:  # only on failure: keep the rerun below undisturbed
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    before = read_journal(journal)[1]
    resumed = subprocess.run(_command(solutions, out), env=env, capture_output=True, text=True, timeout=900)
    return {
        "before": before,
        "resumed": resumed,
        "journal": journal,
        "out": out,
        "solutions": solutions,
        "output": process.stdout.read().decode(errors="replace"),
        "in_flight": in_flight,
        "survivors": survivors,
    }


def _expected_kind(record: dict) -> str:
    model, stem = record["model"], record["problem_id"].split("/")[1]
    return CASES[(model, stem)][1]


def test_killed_batch_resumes_with_every_record_exactly_once(killed_and_resumed):
    run = killed_and_resumed
    # The cases include incorrect solutions: the finished batch exits 1, as `eval` does (issue 29).
    assert run["resumed"].returncode == 1, run["resumed"].stderr[-3000:]
    assert "Traceback" not in run["resumed"].stderr
    assert KILL_AFTER <= len(run["before"]) < len(CASES), run["output"][-2000:]
    records = read_journal(run["journal"])[1]
    keys = [(r["model"], r["gpu"], r["problem_id"], r["solution_sha256"]) for r in records]
    assert len(keys) == len(set(keys)) == len(CASES)  # nothing lost, nothing twice
    assert records[: len(run["before"])] == run["before"]  # the journal was only appended to
    rows = read_results(run["out"])
    assert sorted((r["model"], r["problem_id"]) for r in rows) == sorted((m, f"level1/{s}") for m, s in CASES)
    assert f"ran {len(CASES) - len(run['before'])} now, {len(run['before'])} already" in run["resumed"].stdout


def test_sigkilled_batch_leaves_no_evaluator_process_behind(killed_and_resumed):
    run = killed_and_resumed
    assert run["in_flight"], "the batch was not killed mid-evaluation"
    assert run["survivors"] == {}, "processes outlived the SIGKILLed batch (killed by the test)"


def test_batch_records_have_the_right_verdicts(killed_and_resumed):
    rows = read_results(killed_and_resumed["out"])
    assert len(rows) == len(CASES)
    for row in rows:
        kind, what = _expected_kind(row), f"{row['model']} on {row['problem_id']}: {row}"
        assert row["gpu"] == "H100" and row["device"] == "cpu", what
        assert (
            row["solution_sha256"] == __import__("hashlib").sha256(Path(row["solution_path"]).read_bytes()).hexdigest()
        )
        if kind == "correct":
            assert row["status"] == "correct" and row["correct"], what
            assert row["sol_ms"] and row["ref_ms"] is None, what  # timed; no baseline asked
        else:
            assert not row["correct"] and row["status"] in ("incorrect", "failed"), what
            assert row["speedup"] is None and row["error"], what
        if kind == "hang":
            assert "timed out" in row["error"], what
        if kind in ("correct", "rejected"):
            assert row["compiled"], what
        if kind == "rejected":
            assert row["failed_check"], what
    # the published-runs analysis reads the batch output
    from kernelbench_v3.runs.load import load_runs

    runs = load_runs(killed_and_resumed["out"], problems=PROBLEMS)
    assert len(runs) == len(CASES) and set(runs["problem_id"]) == {"level1/26_GELU_", "level1/23_Softmax"}


RAY_SUBSET = [
    ("honest-w2", "23_Softmax"),
    ("exits", "23_Softmax"),
    ("honest-b512", "26_GELU_"),
    ("torch-only", "26_GELU_"),
]


def test_ray_executor_gives_the_same_records_as_the_local_one(killed_and_resumed, batch_env, tmp_path, monkeypatch):
    pytest.importorskip("ray")
    root, env = batch_env
    for name in ("KBV3_CACHE_DIR", "KBV3_MODULE_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.setenv(name, env[name])  # Ray's workers inherit the driver's environment
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    subset = tmp_path / "subset"
    for model, stem in RAY_SUBSET:
        name = f"{model}_H100_{stem}.py.txt"
        _touch(subset / name, (killed_and_resumed["solutions"] / name).read_text())
    settings = BatchSettings(
        split="h100",
        device="cpu",
        sizes="reduced",
        problems_root=str(PROBLEMS),
        options=EvalOptions(timeout_s=TIMEOUT_S, baseline=False, other_shape=False, seeds=(42,), tolerance="v3"),
    )
    result = run_batch(subset, tmp_path / "ray.parquet", settings, executor="ray", workers=2, progress=False)
    local = {(r["model"], r["problem_id"], r["solution_sha256"]): r for r in read_results(killed_and_resumed["out"])}
    assert len(result.records) == len(RAY_SUBSET)
    for record in result.records:
        twin = local[(record["model"], record["problem_id"], record["solution_sha256"])]
        # Say why two records differ: the records are long and pytest truncates their repr.
        what = (
            f"{record['model']} on {record['problem_id']}: ray {record['status']} "
            f"({record['error']}) vs local {twin['status']} ({twin['error']})"
        )
        for field_name in ("gpu", "status", "correct", "compiled", "failed_check", "checks"):
            assert record[field_name] == twin[field_name], (field_name, what)
        assert record["solution_path"] == str(subset / Path(record["solution_path"]).name)
