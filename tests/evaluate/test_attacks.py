"""Cheating solutions of every threat class (tests/solutions/attacks/) against the evaluator, on CPU.

Each attack is evaluated with the static tamper scan turned OFF, so what is under test is the
design itself: the supervisor, the sandboxed solution process, the verified timing and the
evidence rules. Each must end in the verdict named below, in bounded time, with no file a later
evaluation trusts changed, no connection made and no process left behind. A separate, static
test checks that the scan alone names every attack whose file says `Expect: source_scan`.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelbench_v3.evaluate import EvalRequest, Record, evaluate
from kernelbench_v3.evaluate.process_tree import alive
from kernelbench_v3.evaluate.supervisor.verdict.tamper_scan import scan
from tests.paths import ATTACKS, PACKAGE, PROBLEMS

pytestmark = pytest.mark.slow

SIZES = {"batch_size": 4, "dim": 96}
HANGS = {"busy_loop_forever", "sigterm_ignore_sleep", "threads_200_spin", "sleep_at_import"}
HANG_LIMIT_S = 15.0

# attack -> (the check the verdict must name, or "correct" where the harm was prevented and the
# computation is honest; timing flags that must be set)
EXPECTED: dict[str, tuple[str, set[str]]] = {
    # T1: rule bending
    # Timed inputs are all new, so a cache keyed on exact input bytes never answers a timed call.
    "content_cache_bytes": ("correct", set()),
    # Stopping work after the cases fails timed_outputs, or custom_kernel where the timed window
    # sampled for evidence comes after the switch (see EITHER).
    "empty_after_warmup": ("timed_outputs", set()),
    "partial_rows_after_warmup": ("timed_outputs", set()),
    "rotate_two_buffers": ("output_aliasing", set()),
    "rotate_three_buffers": ("output_aliasing", set()),
    "empty_grid_launch": ("custom_kernel", set()),
    "fake_launch_stub": ("custom_kernel", set()),
    "launch_raises_fallback": ("custom_kernel", set()),
    "uncompilable_kernel_fallback": ("custom_kernel", set()),
    "token_kernel": ("library_ops", set()),  # the reference's own op, at any share
    "epilogue_copy_kernel": ("library_ops", set()),
    "pointer_cache": ("recompute", set()),
    "precision_fp16": ("precision", set()),
    "shape_hardcoded": ("finite", set()),  # NaN at the second shape
    "torch_compile_reference": ("custom_kernel", set()),  # and library_ops: see ALSO_FAILED
    # T2: in-process tampering. Patches reach only the solution process; values are judged and
    # times bounded in the supervisor.
    "stack_walk_getframe": ("correctness", set()),
    "stack_walk_inspect": ("correctness", set()),
    "gc_mutate_evaluator": ("correctness", set()),
    "json_rewrite": ("correctness", set()),
    "patch_torch_compare": ("global_state", set()),  # and correctness: see ALSO_FAILED
    "clock_frozen": ("global_state", set()),
    "clock_slowed": ("global_state", set()),
    "cuda_event_patch": ("global_state", set()),
    "constants_overwrite": ("process", set()),
    "fd_spray_fake_result": ("process", set()),
    "os_exit_after_first_call": ("process", set()),
    "background_thread_compute": ("timed_outputs", set()),
    "builtins_replace": ("correct", set()),
    "global_flags": ("correct", set()),
    # T3: persistence: every write outside the scratch folder is denied
    "persist_baselines": ("correct", set()),
    "persist_module_dir": ("correct", set()),
    "persist_package_source": ("correct", set()),
    "persist_problem_file": ("correct", set()),
    "persist_triton_cache": ("correct", set()),
    # T4: denial, and probes of the sandbox
    "alloc_40gb": ("run", set()),  # RLIMIT_AS: the allocation fails inside forward
    "busy_loop_forever": ("process", set()),
    "sleep_at_import": ("process", set()),
    "sigterm_ignore_sleep": ("process", set()),
    "threads_200_spin": ("process", set()),
    "stdout_flood": ("process", set()),
    "fork_setsid_sleeper": ("correct", set()),
    "network_probe": ("correct", set()),  # it returns zeros if a connection got through
    "signal_parent_probe": ("correct", set()),  # zeros if a signal got through
    "proc_parent_mem_probe": ("correct", set()),  # zeros if the parent's memory was readable
    # Issue 35. The scan's bypasses: each is harmless at run time, and the scan names it (below).
    "scan_resolve_name_fork": ("correct", set()),
    "scan_torch_multiprocessing": ("correct", set()),
    "scan_login_tty": ("correct", set()),
    "scan_pathlib_proc": ("correct", set()),  # zeros if the parent's memory was readable
    "scan_ctypes_computed_name": ("correct", set()),  # zeros if ptrace attached to the parent
    # Stopped means stopped: no ptrace in the sandbox, helpers stay stopped, and one continued
    # behind the supervisor's back fails the pause.
    "ptrace_pair_cancel_stop": ("correct", set()),  # zeros if the seize succeeded
    "helper_runs_beside_member": ("correct", set()),  # zeros if its helper ran beside it
    "helper_timer_sigcont": ("process", set()),
    "numpy_writes_output_view": ("main_work", set()),
    # Issue 39: provenance by byte range, kernel bodies that reach only triton.language, launches
    # that end holding what their programs stored, and no process born while a member runs alone.
    "arena_inplace_numpy": ("input_mutation", set()),  # and output_aliasing: see ALSO_FAILED
    "arena_other_set_numpy": ("main_work", set()),
    "numpy_in_kernel_body": ("run", set()),  # the launch is refused
    "torch_in_kernel_body": ("run", set()),
    "kernel_global_rebound_in_grid": ("run", set()),  # read again at the grid, then run frozen
    "kernel_hook_writes_output": ("correctness", set()),  # the numpy write is put back
    "thread_writes_during_launch": ("correctness", set()),
    "helper_forks_in_arming_gap": ("correct", set()),  # no fork once timing begins
}
# The scan bypasses of issue 35: the rule each file must trip (the scan before it saw none of them).
SCAN_BYPASSES = {
    "scan_resolve_name_fork": "dynamic_code",
    "scan_torch_multiprocessing": "process_control",
    "scan_login_tty": "process_control",
    "scan_pathlib_proc": "native_code",
    "scan_ctypes_computed_name": "native_code",
}
# Detail the verdict must give, where the check alone does not say which defence held.
DETAIL = {"helper_timer_sigcont": "stopped means stopped"}


# Attacks whose verdict may name either check (which call the evidence sampled decides).
EITHER = {
    "empty_after_warmup": {"custom_kernel"},
    "partial_rows_after_warmup": {"custom_kernel"},
    "background_thread_compute": {"custom_kernel"},  # no launch in the sampled timed window's thread
    "shape_hardcoded": {"other_shape"},  # unwritten memory: NaN, or garbage that is merely wrong
}
# Checks that must fail as well as the first one named.
ALSO_FAILED = {
    "torch_compile_reference": "library_ops",
    "patch_torch_compare": "correctness",
    "arena_inplace_numpy": "output_aliasing",
    "kernel_hook_writes_output": "main_work",
    "thread_writes_during_launch": "main_work",
}


def _files() -> dict[str, Path]:
    return {p.stem: p for p in sorted(ATTACKS.glob("*.py"))}


def _digest(paths: list[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.is_file()}


@pytest.fixture(scope="module")
def targets(tmp_path_factory) -> dict:
    """Files a later evaluation would trust, pointed at by the variables the attacks read."""
    base = tmp_path_factory.mktemp("targets")
    cache = base / "cache" / "baselines"
    modules, problems, triton_cache = base / "modules", base / "problems" / "level1", base / "triton"
    for folder in (cache, modules, problems, triton_cache):
        folder.mkdir(parents=True)
    (cache / "entry.json").write_text('{"baseline_ms": 1.0}')
    (modules / "23_Softmax_0123456789abcdef.py").write_text((PROBLEMS / "level1/23_Softmax.py").read_text())
    (problems / "23_Softmax.py").write_text((PROBLEMS / "level1/23_Softmax.py").read_text())
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    os.environ.update(
        ATTACK_KBV3_CACHE_DIR=str(base / "cache"),
        ATTACK_KBV3_MODULE_DIR=str(modules),
        ATTACK_KBV3_PROBLEMS_DIR=str(base / "problems"),
        ATTACK_TRITON_CACHE_DIR=str(triton_cache),
        ATTACK_TEST_PORT=str(listener.getsockname()[1]),
        ATTACK_PID_FILE=str(base / "sleeper.pid"),
    )
    package = PACKAGE
    watched = [
        *cache.iterdir(),
        *modules.iterdir(),
        *problems.iterdir(),
        PROBLEMS / "level1/23_Softmax.py",
    ] + sorted(package.rglob("*.py"))
    yield {
        "base": base,
        "listener": listener,
        "watched": watched,
        "before": _digest(watched),
        "listing": sorted(str(p) for p in base.rglob("*")),
        "triton": triton_cache,
    }
    listener.close()


@pytest.fixture(scope="module")
def records(targets) -> dict[str, tuple[Record, float]]:
    def run(item):
        name, path = item
        request = EvalRequest(
            "level1/23_Softmax",
            path,
            device="cpu",
            sizes=SIZES,
            baseline=False,
            seeds=(42, 123),
            timing_seconds=0.5,
            scan_source=False,
            timeout_s=HANG_LIMIT_S if name in HANGS else 120.0,
        )
        started = time.monotonic()
        return name, (evaluate(request, cache_dir=targets["base"] / "evaluator-cache"), time.monotonic() - started)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(run, _files().items()))


def test_every_attack_file_has_an_expectation():
    assert sorted(_files()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_attack_ends_in_the_named_verdict(records, name):
    record, seconds = records[name]
    check, flags = EXPECTED[name]
    where = (record.status, record.failed_check, record.error, record.timing_flags)
    if check == "correct":
        assert record.correct, where  # the harm was prevented; what it computed is right
    else:
        assert not record.correct and record.speedup is None, where
        assert record.failed_check in {check} | EITHER.get(name, set()), where
    assert flags <= set(record.timing_flags), where
    if name in DETAIL:
        assert DETAIL[name] in record.check_details.get(record.failed_check, ""), where
    if name in ALSO_FAILED:
        assert record.checks.get(ALSO_FAILED[name]) == "fail", (ALSO_FAILED[name], record.checks)
    limit = HANG_LIMIT_S + 30 if name in HANGS else 120
    assert seconds < limit, f"{name} took {seconds:.0f} s"
    assert record.sandbox == "landlock" or not record.sandbox_details.get("landlock_abi"), record.sandbox_details
    assert record.sandbox_details.get("tracing_denied"), record.sandbox_details  # the seccomp filter held


def test_no_file_a_later_evaluation_trusts_was_changed(records, targets):
    assert _digest(targets["watched"]) == targets["before"]
    assert sorted(str(p) for p in targets["base"].rglob("*") if "evaluator-cache" not in str(p)) == [
        p for p in targets["listing"] if "evaluator-cache" not in p
    ]
    home_triton = Path.home() / ".triton" / "cache"
    planted = [p for p in home_triton.rglob("*") if "KBV3_ATTACK" in p.name] if home_triton.exists() else []
    assert not planted


def test_no_connection_reached_the_listener(records, targets):
    with pytest.raises(BlockingIOError):
        targets["listener"].accept()


@pytest.mark.parametrize("name", ["fork_setsid_sleeper", "scan_resolve_name_fork", "scan_torch_multiprocessing"])
def test_no_process_survives_the_evaluation(records, name):
    record, _ = records[name]
    pids = [int(p) for p in re.findall(r"KBV3_ATTACK_SLEEPER_PID=(\d+)", record.log_tail)]
    assert pids, record.log_tail[-500:]
    assert not [p for p in pids if alive(p)]
    assert any(w.startswith("leftover_processes") for w in record.warnings)


@pytest.mark.parametrize("name", sorted(SCAN_BYPASSES))
def test_the_scan_reads_each_bypass_as_what_it_reaches(name):
    result = scan(_files()[name].read_text())
    assert SCAN_BYPASSES[name] in {f.rule for f in result.findings}, result.summary()


def test_the_static_scan_alone_names_every_attack_that_says_so():
    for name, path in _files().items():
        expect = re.search(r"^Expect: (\w+)", path.read_text(), re.M).group(1)
        result = scan(path.read_text())
        assert (not result.ok) == (expect == "source_scan"), (name, result.summary())
