"""End-to-end tests of the evaluator on CPU (Triton interpreter in the child processes).

All evaluations run once, concurrently, in a module-scoped fixture; each test then asserts on
its record. Honest Triton solutions must pass every check; each cheat must be rejected by the
check that names its defect; broken solutions must come back as failed records in bounded time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelbench_v3.evaluate import EvalRequest, Record, evaluate
from kernelbench_v3.evaluate.process_tree import alive, descendants
from kernelbench_v3.evaluate.record import is_phase_step
from kernelbench_v3.evaluate.supervisor.reference.reference_run import REFERENCE_STEPS
from tests.paths import BROKEN, CHEATS, EXAMPLES, SOLUTIONS

SOFTMAX = {"batch_size": 4, "dim": 96}
GELU = {"batch_size": 4, "dim": 200}
LAYERNORM = {"batch_size": 2, "features": 4, "dim1": 8, "dim2": 8}
# Large enough rows that LayerNorm(x) ~ x on N(0,1) inputs, so only stress inputs expose it.
LAYERNORM_LARGE = {"batch_size": 2, "features": 16, "dim1": 128, "dim2": 128}
FAST = {"baseline": False, "time_solution": False, "seeds": (42, 123)}
CONTENT_CACHE_OPTIONS = {"sizes": SOFTMAX, "time_solution": True, "other_shape": False}

HONEST = {
    "softmax": ("level1/23_Softmax", EXAMPLES / "level1/23_Softmax.py", {"baseline": False}),
    "gelu": ("level1/26_GELU_", EXAMPLES / "level1/26_GELU_.py", {**FAST, "sizes": GELU}),
    "matmul": (
        "level1/1_Square_matrix_multiplication_",
        EXAMPLES / "level1/1_Square_matrix_multiplication_.py",
        {**FAST, "sizes": {"N": 48}},
    ),
    "layernorm": ("level1/40_LayerNorm", EXAMPLES / "level1/40_LayerNorm.py", {**FAST, "sizes": LAYERNORM}),
    "fused_gemm": (
        "level2/86_Matmul_Divide_GELU",
        EXAMPLES / "level2/86_Matmul_Divide_GELU.py",
        {**FAST, "sizes": {"batch_size": 8, "input_size": 96, "output_size": 80}},
    ),
    "tile_gemm": (
        "tile_specialized/gemm_bias_relu",
        EXAMPLES / "tile_specialized/gemm_bias_relu.py",
        {**FAST, "sizes": {"m": 32, "n": 64, "k": 48}},
    ),
    # deep-copies/pickles tensors and calls torch.compile at import: runtime caches, no monkeypatch
    # (its torch.compile at import is what the static scan and the strict kernel rule reject, so
    # both are off for it: what is under test is that runtime caches are not taken for tampering)
    "runtime_caches": (
        "level1/23_Softmax",
        SOLUTIONS / "runtime_caches_softmax.py",
        {**FAST, "sizes": SOFTMAX, "scan_source": False, "kernel_rule": "v3"},
    ),
}
# (problem, solution, options, the check that must be named as failing)
CHEATING = {
    "weights_dropped": ("level1/40_LayerNorm", "weights_dropped.py", {"sizes": LAYERNORM}, "state_dict"),
    "identity_at_init": ("level1/40_LayerNorm", "identity_at_init.py", {"sizes": LAYERNORM}, "correctness"),
    "near_identity": (
        "level1/40_LayerNorm",
        "near_identity_layernorm.py",
        {"sizes": LAYERNORM_LARGE, "other_shape": False},
        "stress",
    ),
    "precision_downcast": (
        "level2/86_Matmul_Divide_GELU",
        "precision_downcast.py",
        {"sizes": {"batch_size": 8, "input_size": 256, "output_size": 64}},
        "precision",
    ),
    "input_mutation": ("level1/23_Softmax", "input_mutation.py", {"sizes": SOFTMAX}, "input_mutation"),
    "returns_input": ("level1/26_GELU_", "returns_input.py", {"sizes": GELU}, "input_mutation"),
    "returns_buffer": ("level1/23_Softmax", "returns_buffer.py", {"sizes": SOFTMAX}, "output_aliasing"),
    "pointer_cache": ("level1/23_Softmax", "pointer_cache.py", {"sizes": SOFTMAX}, "recompute"),
    # Caches keyed on input values: a weak key (sampled elements + sum) collides on a near-duplicate
    # input; an exact key (hash of the bytes) never hits on timed calls, whose inputs are all new.
    "content_cache": ("level1/23_Softmax", "content_cache.py", CONTENT_CACHE_OPTIONS, "input_reuse"),
    "content_hash_cache": ("level1/23_Softmax", "content_hash_cache.py", CONTENT_CACHE_OPTIONS, "correct"),
    "pure_torch": ("level1/23_Softmax", "pure_torch.py", {"sizes": SOFTMAX}, "custom_kernel"),
    "monkeypatch": ("level1/23_Softmax", "monkeypatch_torch.py", {"sizes": SOFTMAX}, "source_scan"),
    # Without the static scan the patches are still seen at run time, and judged in the supervisor.
    "monkeypatch_unscanned": (
        "level1/23_Softmax",
        "monkeypatch_torch.py",
        {"sizes": SOFTMAX, "scan_source": False},
        "global_state",
    ),
    "wrong_dtype": ("level1/23_Softmax", "wrong_dtype.py", {"sizes": SOFTMAX}, "output_dtype"),
    "nan": ("level1/23_Softmax", "nan_output.py", {"sizes": SOFTMAX}, "finite"),
    "forged_result_file": ("level1/23_Softmax", "forged_result_file.py", {"sizes": SOFTMAX}, "process"),
}
# (solution, options, failed check, words the reason must contain)
BROKEN_CASES = {
    "crash": ("crash.py", {}, "process", "signal"),
    "hang": ("hang.py", {"timeout_s": 40.0}, "process", "timed out"),
    "exit_at_import": ("exit_at_import.py", {}, "import", "SystemExit"),
    "os_exit": ("os_exit.py", {}, "process", "exited with code 0"),
    "flood": ("flood.py", {}, "process", "MiB"),
}

pytestmark = pytest.mark.slow  # evaluations in child processes


def _request(problem: str, path: Path, options: dict) -> EvalRequest:
    options = dict(options)
    options.setdefault("baseline", False)
    options.setdefault("time_solution", False)
    options.setdefault("seeds", (42, 123))
    return EvalRequest(problem, path, device="cpu", timeout_s=options.pop("timeout_s", 240.0), **options)


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> dict[str, tuple[Record, float]]:
    cache = tmp_path_factory.mktemp("cache")
    jobs: dict[str, EvalRequest] = {}
    for key, (problem, path, options) in HONEST.items():
        jobs[key] = EvalRequest(problem, path, device="cpu", timeout_s=240.0, **options)
    for key, (problem, name, options, _) in CHEATING.items():
        jobs[key] = _request(problem, CHEATS / name, options)
    for key, (name, options, _, _) in BROKEN_CASES.items():
        # The process-level failures themselves, not the static scan, are under test here.
        jobs[key] = _request("level1/23_Softmax", BROKEN / name, {"sizes": SOFTMAX, "scan_source": False, **options})

    def run(item):
        key, request = item
        started = time.monotonic()
        return key, (evaluate(request, cache_dir=cache), time.monotonic() - started)

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(pool.map(run, jobs.items()))


@pytest.mark.parametrize("key", sorted(HONEST))
def test_honest_triton_solution_passes(records, key):
    record, _ = records[key]
    assert record.correct, (record.failed_check, record.error, record.log_tail[-2000:])
    assert record.status == "correct" and record.compiled
    assert set(record.checks.values()) <= {"pass", "skip"}
    for check in (
        "state_dict",
        "correctness",
        "stress",
        "recompute",
        "custom_kernel",
        "input_mutation",
        "output_aliasing",
    ):
        assert record.checks[check] == "pass", check
    assert record.checks["other_shape"] == "pass"
    assert record.triton_launches and record.kernel_names
    assert record.max_abs_error is not None and record.max_abs_error < 1e-2
    assert record.seeds == [42, 123, 456, 789, 1337] or record.seeds == [42, 123]
    assert record.fingerprint["torch"] and record.fingerprint["device"] == "cpu"


def test_fp32_problems_report_error_against_float64(records):
    for key in ("softmax", "gelu", "matmul", "layernorm", "fused_gemm"):
        record, _ = records[key]
        assert record.error_reference == "float64", key
        assert record.rel_error < 1e-4, (key, record.rel_error)
        assert record.checks["precision"] == "pass"
    tile, _ = records["tile_gemm"]
    assert tile.precision_used == "fp16"  # the published rule: the first input's dtype


def test_cpu_timing_is_the_supervisors_calls_and_marked(records):
    record, _ = records["softmax"]
    assert record.timing_method == "supervisor_calls_cpu" and record.timing_meaningful is False
    assert record.sol_ms > 0 and record.event_ms > 0 and record.timing_details["calls"]["calls"] >= 3
    assert record.sol_p10_ms <= record.sol_ms <= record.sol_p90_ms
    assert record.checks["impossible_time"] == "pass" and record.checks["timing_gap"] == "pass"
    assert record.sol_reps >= 2 and record.checks["timed_outputs"] == "pass"
    assert record.speedup is None  # no baseline was requested
    assert "REDUCED_SIZES" in record.sizes_note and record.sizes == {"batch_size": 16, "dim": 1024}
    # Where the time went: one figure per phase, together within the whole evaluation, and the
    # solution process's steps within the candidate phase.
    top = {name: s for name, s in record.phase_s.items() if not is_phase_step(name)}
    steps = {name: s for name, s in record.phase_s.items() if name.startswith("solution_")}
    reference_steps = {name: s for name, s in record.phase_s.items() if name.startswith("reference_")}
    assert set(top) == {"setup", "reference", "candidate", "verdict", "cleanup", "bookkeeping"}
    # Every second is in a phase: the top-level phases add up to the evaluation's duration.
    assert sum(top.values()) == pytest.approx(record.duration_s, abs=0.01)
    assert set(steps) == {
        "solution_arena",
        "solution_zygote_wait",
        "solution_spawn",
        "solution_start",
        "solution_setup",
        "solution_inputs",
        "solution_cases",
        "solution_outputs",
        "solution_compare",
        "solution_precheck",
        "solution_timing_setup",
        "solution_timing",
        "solution_timing_evidence",
        "solution_timing_close",
        "solution_finish",
        "solution_close",
    }
    assert all(s >= 0 for s in record.phase_s.values())
    # ... and every second of the candidate phase is in one of its steps (each rounded once).
    assert sum(steps.values()) == pytest.approx(top["candidate"], abs=0.0005 * len(steps))
    # So is every second of the reference phase: its cases' input draws, forwards, copies, ...
    assert {"reference_setup", "reference_build", "reference_inputs", "reference_copy"} <= set(reference_steps)
    assert set(reference_steps) <= {f"reference_{s}" for s in REFERENCE_STEPS}
    assert sum(reference_steps.values()) == pytest.approx(top["reference"], abs=0.0005 * len(reference_steps))


@pytest.mark.parametrize("key", sorted(CHEATING))
def test_cheat_is_rejected_by_the_right_check(records, key):
    record, _ = records[key]
    expected = CHEATING[key][3]
    if expected == "correct":  # the harm was prevented (see its own test)
        assert record.correct, (record.failed_check, record.error)
        return
    assert not record.correct and record.speedup is None
    assert record.failed_check == expected, (record.failed_check, record.error, record.checks)
    if expected != "process":
        assert record.checks[expected] == "fail"
        assert record.check_details[expected]


def test_returning_the_input_is_also_flagged_as_aliasing(records):
    record, _ = records["returns_input"]
    assert record.checks["output_aliasing"] == "fail"
    assert "input 0" in record.check_details["output_aliasing"]


def test_monkeypatching_names_what_was_replaced_and_the_verdict_stands(records):
    scanned, _ = records["monkeypatch"]
    assert "line 7: torch.allclose = " in scanned.check_details["source_scan"]
    record, _ = records["monkeypatch_unscanned"]
    detail = record.check_details["global_state"]
    assert "torch.allclose" in detail and "torch.Tensor.__sub__" in detail
    assert record.checks["correctness"] == "fail"  # judged in the parent, unaffected


def test_content_caches_are_caught_and_timed_on_fresh_inputs(records):
    weak, _ = records["content_cache"]
    # Its key misses the swapped pair, so the near-duplicate set gets the stale answer.
    assert "near_duplicate_seed42" in weak.check_details["input_reuse"]
    exact, _ = records["content_hash_cache"]
    # Every checked output is right, and every timed input was new: the cache never answered.
    assert exact.correct and exact.checks["timed_outputs"] == "pass", exact.check_details
    assert exact.timing_method == "supervisor_calls_cpu"
    honest, _ = records["softmax"]
    assert honest.checks["input_reuse"] == "pass"


def test_pure_torch_names_the_library_kernels_it_ran(records):
    record, _ = records["pure_torch"]
    assert record.triton_launches == 0
    assert "no custom kernel" in record.check_details["custom_kernel"]
    # ...and it is otherwise correct: only the kernel requirement rejects it.
    assert record.checks["correctness"] == "pass"


@pytest.mark.parametrize("key", sorted(BROKEN_CASES))
def test_broken_solution_gives_failed_record_in_bounded_time(records, key):
    record, seconds = records[key]
    _, options, check, words = BROKEN_CASES[key]
    assert record.status == "failed" and not record.correct
    assert record.failed_check == check
    assert words in record.error, record.error
    assert seconds < options.get("timeout_s", 240.0) + 120
    assert len(record.log_tail) <= 64_000


def test_record_round_trips_through_json(records):
    record, _ = records["softmax"]
    again = Record.from_json(record.to_json())
    assert again == record
    row = record.runs_row()
    assert list(row) == [
        "model",
        "gpu",
        "level",
        "problem",
        "compiled",
        "correct",
        "speedup",
        "ref_ms",
        "sol_ms",
        "op_type",
        "baseline_type",
        "precision_used",
    ]
    assert row["problem"] == "23_Softmax.py" and row["gpu"] == "H100"


def test_cli_json_prints_exactly_one_record_even_when_the_solution_prints_json(tmp_path):
    env = {**os.environ, "KBV3_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernelbench_v3.cli",
            "eval",
            "--problem",
            "level1/23_Softmax",
            "--solution",
            str(CHEATS / "fake_json_stdout.py"),
            "--device",
            "cpu",
            "--sizes",
            "batch_size=4,dim=32",
            "--seeds",
            "42",
            "--no-timing",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=400,
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    record = json.loads(lines[0])
    assert record["correct"] is False and record["failed_check"] == "correctness"
    assert record["sizes"] == {"batch_size": 4, "dim": 32} and record["sizes_note"] == ""
    assert proc.returncode == 1
    assert '"speedup": 99.0' in record["log_tail"]  # what it printed is kept, never parsed


def test_unknown_problem_and_missing_solution_raise(tmp_path):
    with pytest.raises(KeyError):
        evaluate(EvalRequest("level1/does_not_exist", EXAMPLES / "level1/23_Softmax.py", device="cpu"))
    with pytest.raises(FileNotFoundError):
        evaluate(EvalRequest("level1/23_Softmax", tmp_path / "missing.py", device="cpu"))
    with pytest.raises(ValueError, match="timing_seconds"):
        EvalRequest("level1/23_Softmax", EXAMPLES / "level1/23_Softmax.py", device="cpu", timing_seconds=0)


def _zygotes(parent: int) -> list[int]:
    """The zygotes of the evaluation run by `parent`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if ppid == parent and "kernelbench_v3.evaluate.solution.zygote" in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(("solution", "processes"), [("hang.py", 1), ("hang_detached.py", 2)])
def test_children_die_when_the_evaluating_process_is_sigkilled(tmp_path, solution, processes):
    """The solution process, and one it detached into a session of its own (the zygote ends
    what it holds before it dies: a detached process would otherwise be handed on to init)."""
    script = (
        "from kernelbench_v3.evaluate import EvalRequest, evaluate\n"
        f"evaluate(EvalRequest('level1/23_Softmax', {str(BROKEN / solution)!r}, device='cpu', timeout_s=300,"
        " sizes={'batch_size': 4, 'dim': 96}, baseline=False, time_solution=False, seeds=(42,), scan_source=False),"
        f" cache_dir={str(tmp_path)!r})\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script])
    below: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while len(below) < processes and time.monotonic() < deadline and parent.poll() is None:
            time.sleep(0.2)
            below = [pid for zygote in _zygotes(parent.pid) for pid in descendants(zygote)]
        time.sleep(1.0)  # let it reach the hanging forward (and a double fork's middle process exit)
        below = [pid for zygote in _zygotes(parent.pid) for pid in descendants(zygote)]
        assert len(below) == processes, f"not the solution's processes: {below}"
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5
        while any(alive(p) for p in below) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in below if alive(p)], "a process of the solution outlived its SIGKILLed parent"
    finally:
        parent.kill()
        for pid in below:
            if alive(pid):
                os.kill(pid, 9)


# A reference that works everywhere except in the baseline's timing process (its argv names
# the role), standing in for a reference that crashes or hangs under timing/torch.compile.
FLAKY_BASELINE_PROBLEM = '''"""Adds one; raises when the evaluator times it as the baseline."""
import sys

import torch
import torch.nn as nn

OP_TYPE = "elementwise"
SUPPORTED_PRECISIONS = ["fp32"]
HARDWARE_REQUIRED = ["RTX3090", "H100", "B200"]


class Model(nn.Module):
    def forward(self, x):
        if "baseline" in sys.argv[1:2]:
            raise RuntimeError("the reference cannot be timed here")
        return x + 1.0


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''


def test_a_failed_baseline_is_cached_reported_and_retried_on_request(tmp_path):
    root = tmp_path / "problems"
    (root / "level1").mkdir(parents=True)
    (root / "level1" / "1_FlakyBaseline.py").write_text(FLAKY_BASELINE_PROBLEM)
    solution = tmp_path / "solution.py"
    solution.write_text(FLAKY_BASELINE_PROBLEM.replace('if "baseline"', 'if "never"'))
    # baseline=True: the CPU times no baseline unless asked (issue 33, item 2); asked, it fails here.
    options = dict(
        device="cpu", timeout_s=120.0, seeds=(42,), other_shape=False, require_custom_kernel=False, baseline=True
    )

    def run(**extra):
        request = EvalRequest("level1/1_FlakyBaseline", solution, **options, **extra)
        return evaluate(request, problems_dir=root, cache_dir=tmp_path / "cache")

    first = run()
    assert first.correct and first.sol_ms and first.speedup is None and first.baseline_ms is None
    assert "the reference cannot be timed here" in first.baseline_error and first.baseline_cached is False
    assert "baseline_failed" in first.timing_flags
    second = run()
    assert second.baseline_cached is True and "cached failure" in second.baseline_error
    assert second.speedup is None and "the reference cannot be timed here" in second.baseline_error
    third = run(retry_failed_baseline=True)
    assert third.baseline_cached is False and third.baseline_error


def test_the_reference_passes_give_back_their_memory_before_a_cold_baseline_times(tmp_path, monkeypatch):
    """A cold baseline's child allocates only from what is free: the supervisor's reference
    passes give their cached memory back before the child may time (on an H100 level3/31's
    baseline ran out of memory beside the 56 GB they kept)."""
    from kernelbench_v3.evaluate.supervisor.run import evaluation

    root = tmp_path / "problems"
    (root / "level1").mkdir(parents=True)
    (root / "level1" / "1_FlakyBaseline.py").write_text(FLAKY_BASELINE_PROBLEM)
    solution = tmp_path / "solution.py"
    solution.write_text(FLAKY_BASELINE_PROBLEM.replace('if "baseline"', 'if "never"'))
    order = []
    monkeypatch.setattr(evaluation, "release_cached", lambda device: order.append(("release", device)))
    release = evaluation.BaselineAhead.release
    monkeypatch.setattr(
        evaluation.BaselineAhead, "release", lambda self: (order.append(("baseline may time",)), release(self))
    )
    request = EvalRequest(
        "level1/1_FlakyBaseline",
        solution,
        device="cpu",
        timeout_s=120.0,
        seeds=(42,),
        other_shape=False,
        require_custom_kernel=False,
        baseline=True,
    )
    rec = evaluate(request, problems_dir=root, cache_dir=tmp_path / "cache")
    assert rec.correct and order[:2] == [("release", "cpu"), ("baseline may time",)]


def test_a_cpu_evaluation_times_no_baseline_unless_asked(tmp_path, monkeypatch):
    """Issue 33, item 2: on the CPU the speedup is never given, so its baseline is not timed (it
    took most of a CPU evaluation); the record has no `baseline` phase and no baseline error."""
    from kernelbench_v3.evaluate.supervisor.run import evaluation

    root = tmp_path / "problems"
    (root / "level1").mkdir(parents=True)
    (root / "level1" / "1_FlakyBaseline.py").write_text(FLAKY_BASELINE_PROBLEM)
    solution = tmp_path / "solution.py"
    solution.write_text(FLAKY_BASELINE_PROBLEM.replace('if "baseline"', 'if "never"'))

    def no_baseline(*args, **kwargs):
        raise AssertionError("the baseline was requested on the CPU")

    monkeypatch.setattr(evaluation, "request_job", no_baseline)
    monkeypatch.setattr(evaluation, "BaselineAhead", no_baseline)
    request = EvalRequest(
        "level1/1_FlakyBaseline", solution, device="cpu", timeout_s=120.0, seeds=(42,), other_shape=False,
        require_custom_kernel=False, timing_seconds=0.2,
    )  # fmt: skip
    assert request.baseline is None and not request.wants_baseline
    record = evaluate(request, problems_dir=root, cache_dir=tmp_path / "cache")
    assert record.correct and record.sol_ms, (record.failed_check, record.error)
    assert "baseline" not in record.phase_s and "candidate" in record.phase_s, record.phase_s
    assert record.baseline_ms is None and record.baseline_error is None and record.speedup is None
    assert "baseline_failed" not in record.timing_flags


def test_a_dataset_row_is_evaluated_from_its_verified_code(tmp_path):
    from kernelbench_v3.catalog.problem import get_problem
    from kernelbench_v3.dataset.hub import RowIntegrityError

    problem = get_problem("level1/23_Softmax")
    row = {
        "problem_id": problem.problem_id,
        "category": problem.category,
        "file_name": problem.file_name,
        "code": problem.source,
        "sha256": problem.sha256,
    }
    options = dict(device="cpu", sizes=SOFTMAX, baseline=False, time_solution=False, seeds=(42,))
    record = evaluate(row, EXAMPLES / "level1/23_Softmax.py", cache_dir=tmp_path, **options)
    assert record.correct and record.problem_sha256 == problem.sha256
    by_id = evaluate("level1/23_Softmax", EXAMPLES / "level1/23_Softmax.py", cache_dir=tmp_path, **options)
    assert by_id.correct
    with pytest.raises(RowIntegrityError, match="does not match its sha256"):
        evaluate({**row, "code": row["code"] + "\n# altered\n"}, EXAMPLES / "level1/23_Softmax.py", **options)
    with pytest.raises(TypeError, match="needs the solution file"):
        evaluate(row)
