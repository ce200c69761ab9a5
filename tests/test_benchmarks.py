"""The benchmark scripts under benchmarks/ rehearse on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.paths import BENCHMARKS


@pytest.mark.slow
def test_bench_script_rehearses_on_cpu(tmp_path):
    out = tmp_path / "bench.md"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "bench" / "bench_evaluator_gpu.py"),
            "--device",
            "cpu",
            "--out",
            str(out),
            "--part",
            "baselines",
            "--problems",
            "level1/26_GELU_",
            "--no-compile",
            "--cache",
            str(tmp_path / "c"),
            "--timing-seconds",
            "0.5",
            "--workers",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = out.read_text()
    assert "| level1/26_GELU_ |" in text and "eager" in text
    rows = [json.loads(line) for line in (tmp_path / "bench.md.jsonl").read_text().splitlines()]
    assert rows[0]["part"] == "baselines" and rows[0]["eager_ms"] > 0


def _throughput_module():
    import importlib.util

    path = BENCHMARKS / "bench" / "bench_throughput_gpu.py"
    spec = importlib.util.spec_from_file_location("bench_throughput_gpu", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _throughput_report_module():
    _throughput_module()  # puts benchmarks/bench on sys.path
    import throughput_report

    return throughput_report


def test_throughput_picks_honest_then_spread_problems():
    from kernelbench_v3.catalog.problem import discover

    bench = _throughput_module()
    problems = discover(split="h100")
    chosen = bench.pick_evals(problems, 20)
    ids = [p.problem_id for p in chosen]
    assert len(ids) == len(set(ids)) == 20
    assert ids[:6] == bench.HONEST  # every honest example, then references spread over the split
    assert {i.split("/")[0] for i in ids[6:]} >= {"level1", "level2", "level3", "level4", "tile_specialized"}
    assert [p.problem_id for p in bench.pick_evals(problems, 1)] == ["level1/23_Softmax"]


def test_throughput_report_renders_targets(tmp_path):
    bench = _throughput_report_module()
    journal = bench.Journal(tmp_path / "throughput.jsonl")
    phases = {"reference": 1.0, "baseline": 2.0, "candidate": 3.0}
    for mode, wall in (("cold", 12.0), ("warm", 5.0)):
        journal.add(
            {"kind": "eval", "mode": mode, "problem": "level1/23_Softmax", "solution": "honest", "wall_s": wall}
            | {"status": "correct", "sol_ms": 0.0150, "duration_s": wall - 2, "phase_s": phases, "stopped": False}
        )
    for gpus, wall, ms in (("0,1", 100.0, 0.01501), ("0", 200.0, 0.0160)):
        record = {"problem_id": "level1/23_Softmax", "status": "correct", "sol_ms": ms, "phase_s": phases}
        journal.add(
            {"kind": "batch", "pass": "timed", "gpus": gpus, "n_gpus": len(gpus.split(",")), "solutions": 54}
            | {"wall_s": wall, "stopped": False, "complete": True, "statuses": {"correct": 1}, "records": [record] * 54}
        )
    text = bench.report(bench.Journal(journal.path), {"device": "cuda"}, "cmd")
    assert "| cold | 1 | 1 correct | 12.00 |" in text and "| yes |" in text
    assert "| timed | 0 | default | 54/54 | 1 correct | 200.0 | 3.70 |" in text
    assert "2.00x | >= 1.9x | yes |" in text
    assert "+0.07%" in text and "+6.67%" in text and "; 1/2 within 1%" in text
    assert (
        "Batch vs eval: 2/2 within the fidelity bounds (3% from 50 us, 8% from 10 to 50 us; target: all): yes" in text
    )
    assert "| reference | 1.00 / 1.00 |" in text


def test_throughput_report_pools_warm_passes_and_names_workers_and_cold_baselines(tmp_path):
    bench = _throughput_report_module()
    journal = bench.Journal(tmp_path / "throughput.jsonl")
    cold_phases = {"reference": 1.0, "baseline": 6.0, "baseline_compile": 5.0, "baseline_eager": 0.5}
    cold_phases |= {"baseline_wait": 2.0, "baseline_rest": 0.1}
    journal.add(
        {"kind": "eval", "mode": "cold", "problem": "level1/23_Softmax", "solution": "honest", "wall_s": 20.0}
        | {"status": "correct", "sol_ms": 0.015, "phase_s": cold_phases, "baseline_cached": False}
        | {"wall_background_s": {"baseline_start": 1.0, "baseline_compile": 2.0}, "stopped": False}
    )
    for mode, wall, ms in (("warm", 5.0, 0.0150), ("warm-2", 7.0, 0.0152), ("warm-3", 6.0, 0.0154)):
        journal.add(
            {"kind": "eval", "mode": mode, "problem": "level1/23_Softmax", "solution": "honest", "wall_s": wall}
            | {"status": "correct", "sol_ms": ms, "phase_s": {"reference": 0.5}, "baseline_cached": True}
        )
    for workers, wall in ((2, 108.0), (1, 216.0)):
        record = {"problem_id": "level1/23_Softmax", "status": "correct", "sol_ms": 0.0153, "phase_s": {}}
        journal.add(
            {"kind": "batch", "pass": "timed", "gpus": "0", "n_gpus": 1, "workers": workers, "solutions": 54}
            | {
                "wall_s": wall,
                "stopped": False,
                "complete": True,
                "statuses": {"correct": 54},
                "records": [record] * 54,
            }
        )
    baselines = {"kind": "baselines", "wall_s": 90.0, "rc": 0, "stopped": False, "timed": 9, "cached": 45}
    seconds = {f"level1/{n}_P": s for n, s in enumerate([9.5, 3.0, 2.0, 2.5, 3.5, 2.2, 2.8, 3.1, 2.4])}
    journal.add(baselines | {"failed": 0, "problems": {}, "seconds": seconds})
    for problem, setting, wall in (("p1", "default", 12.0), ("p1", "one_thread", 9.0), ("p2", "one_thread", 7.0)):
        journal.add({"kind": "compile", "problem": problem, "setting": setting, "wall_s": wall, "rc": 0})
    text = bench.report(bench.Journal(journal.path), {"device": "cuda"}, "cmd")
    assert "| p1 | 12.0 | 9.0 | - |" in text and "| p2 | - | 7.0 | - |" in text
    assert "| **median** | 12.0 | 8.0 | |" in text
    assert "| warm (3 passes) | 3 | 3 correct | 6.00 |" in text and "| 5.0, 7.0, 6.0 |" in text
    assert "| waited for (`baseline` phase) | 1 | 6.00 |" in text and "| <= 8 s | yes |" in text
    # the child's steps: compile 5 + 2 (waited and beside), eager 0.5, start 1; not its lock wait
    assert "| the child's work (steps less its lock wait) | 1 | 8.50 |" in text
    assert "9 timed, 45 found cached, 0 failed in 90.0 s: 10.00 s per problem timed." in text
    assert "| timed in (the command's seconds for it) | 9 | 9.50 | 2.80 | 4.70 | 9.50 | <= 8 s |" in text
    assert "| timed | 0 | 2 | 54/54 | 54 correct | 108.0 | 2.00 |" in text
    assert "| timed | 0 | 1 | 54/54 | 54 correct | 216.0 | 4.00 |" in text
    assert "| 0.0152 | 0.015 (-1.32%) | 0.0153 (+0.66%) | 0.0153 (+0.66%) |" in text  # warm median 0.0152
    assert "batch GPUs 0, 1 workers: sol_ms (diff)" in text and "| eval warm (n=3) |" in text


def test_throughput_bench_reads_kbv3_baselines_output_and_its_parts():
    bench = _throughput_module()
    out = "level1/1_Square: 1.2 ms (compiled; eager 1.3, compiled 1.2) [timed]\nlevel1/2_X: 0.5 ms (eager; eager 0.5, "
    out += "compiled n/a) [cached]\nlevel2/3_Y: failed (timed): boom [x]\nnote: these are CPU times\n"
    assert bench.baselines_lines(out) == {"level1/1_Square": "timed", "level1/2_X": "cached", "level2/3_Y": "failed"}
    now = out.replace("[timed]", "[timed in 3.25 s]").replace("boom [x]", "boom [timed in 1.00 s]")
    assert bench.baselines_lines(now) == bench.baselines_lines(out)  # today's report, seconds and all
    assert bench.baselines_seconds(now) == {"level1/1_Square": 3.25}  # a failure's seconds are no baseline's
    assert bench.expand_parts("eval,batch") == {"eval", "fill", "timed"}
    assert bench.eval_passes(3) == [("cold", 0.4), ("warm", 0.55), ("warm-2", 0.55), ("warm-3", 0.55)]
    assert bench.eval_passes(0) == [("cold", 0.4)]  # --warm-passes 0: the cold pass alone
    with pytest.raises(SystemExit, match="unknown part 'bogus'"):
        bench.expand_parts("eval,bogus")


def test_throughput_report_gives_every_part_of_the_eval_process_its_median_and_p90(tmp_path):
    bench = _throughput_report_module()
    journal = bench.Journal(tmp_path / "throughput.jsonl")
    for i, (wall, record_wall) in enumerate(((5.0, 4.5), (6.0, 5.2), (7.0, 6.1))):
        parts = {"cli_import": 0.1, "supervisor_import": 1.0 + i, "solution_timing": 2.0, "unattributed": 0.0}
        journal.add(
            {"kind": "eval", "mode": "warm", "problem": f"p{i}", "solution": "honest", "wall_s": wall}
            | {"status": "correct", "record_wall_s": record_wall, "wall_phase_s": parts}
            | {"wall_background_s": {"zygote_start": 3.0}, "stopped": False}
        )
    journal.add({"kind": "eval", "mode": "cold", "problem": "old", "solution": "honest", "wall_s": 9.0})  # pre-42
    order, parts, beside = bench.wall_parts(list(journal.evals("warm").values()))
    assert order == ["cli_import", "supervisor_import", "solution_timing", "unattributed", "process_exit"]
    assert parts["process_exit"] == [0.5, 0.8, 0.9] and beside == {"zygote_start": [3.0, 3.0, 3.0]}
    text = bench.report(bench.Journal(journal.path), {"device": "cuda"}, "cmd")
    section = text.split("## 5.")[1]
    assert "| part | cold (n=1) | warm (n=3) |" in section
    assert "| supervisor_import | - | 2.00 / 2.80 |" in section  # median and p90 of 1, 2, 3
    assert "| process_exit | - | 0.80 / 0.88 |" in section
    assert "| **wall (this script's clock)** | 9.00 / 9.00 | 6.00 / 6.80 |" in section
    assert "| beside: zygote_start | - | 3.00 / 3.00 |" in section


@pytest.mark.slow
def test_throughput_bench_rehearses_on_cpu(tmp_path):
    """The issue-17 throughput benchmark end to end in its quickest CPU mode, with `datasets`
    made unimportable (the GPU hosts lack it): one cold and one warm `kbv3 eval`, two requests to
    a `kbv3 serve`, a fill and a timed `kbv3 eval-batch` of one solution."""
    poison = tmp_path / "poison" / "datasets"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text("raise ImportError('datasets must not be imported here')\n")
    out = tmp_path / "tp"
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench" / "bench_throughput_gpu.py"), "--device", "cpu", "--quick"]
        + ["--evals", "1", "--batch-limit", "1", "--gpus", "0", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(poison.parent)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:] + proc.stdout[-2000:]
    text = (out / "throughput.md").read_text()
    assert text in proc.stdout  # the table is printed as written
    assert (
        "CPU rehearsal" in text and "| cold | 1 | 1 correct |" in text and "| warm (1 pass) | 1 | 1 correct |" in text
    )
    assert "| timed | 0 | default | 1/1 | 1 correct |" in text and "| solution_timing |" in text
    assert "| supervisor_import |" in text.split("## 5.")[1] and "| process_exit |" in text
    rows = [json.loads(line) for line in (out / "throughput.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in rows] == ["run", "eval", "eval", "eval", "eval", "batch", "batch"]
    assert [r["mode"] for r in rows if r["kind"] == "eval"] == ["cold", "warm", "serve", "serve"]
    assert "| serve | 2 | 2 correct |" in text and "| serve (n=2) |" in text  # two `kbv3 eval --server`


def _small_kernels_module():
    import importlib.util

    sys.path.insert(0, str(BENCHMARKS / "bench"))
    path = BENCHMARKS / "bench" / "bench_small_kernels_gpu.py"
    spec = importlib.util.spec_from_file_location("bench_small_kernels_gpu", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_small_kernels_ladder_rungs_and_problem_are_real_files(tmp_path):
    from kernelbench_v3.catalog.problem import get_problem

    bench = _small_kernels_module()
    rungs = bench.ladder_solutions(tmp_path)
    assert [r[2] for r in rungs] == [f"ladder {us} us" for us in bench.LADDER_US]
    assert "SPIN_NS = 500000" in rungs[-1][1].read_text() and "{spin_ns}" not in rungs[0][1].read_text()
    compile(rungs[0][1].read_text(), "rung", "exec")
    problem = get_problem(bench.LADDER_PROBLEM, BENCHMARKS / "problems")
    assert problem.path.exists()
    for _, path, _ in bench.SOLUTIONS:
        assert path.exists(), path


def test_small_kernels_journal_resumes_and_the_report_renders(tmp_path):
    bench = _small_kernels_module()
    journal = bench.Journal(tmp_path)
    sol = "benchmarks/solutions/level1/26_GELU_persistent.py"
    journal.write(
        "outside|level1/26_GELU_|x",
        {
            "part": "outside",
            "problem": "level1/26_GELU_",
            "solution": sol,
            "rotating_ms": 0.0105,
            "single_call_ms": 0.0126,
        },
    )
    journal.write(
        "outside-ref|level1/26_GELU_",
        {
            "part": "outside-ref",
            "problem": "level1/26_GELU_",
            "eager_rotating_ms": 0.0111,
            "compiled_events_ms": 0.0164,
        },
    )
    for run, ms in enumerate((0.0107, 0.0109)):
        journal.write(
            f"evaluator|mps|level1/26_GELU_|{sol}|{run}",
            {
                "part": "evaluator",
                "mode": "mps",
                "kind": "honest",
                "problem": "level1/26_GELU_",
                "solution": sol,
                "label": "honest persistent GELU",
                "run": run,
                "status": "correct",
                "sol_ms": ms,
                "speedup": 1.03,
                "timing_flags": [],
            },
        )
    again = bench.Journal(tmp_path)  # a rerun: every key written is known and skipped
    assert again.has("outside|level1/26_GELU_|x") and again.has(f"evaluator|mps|level1/26_GELU_|{sol}|1")
    from small_kernels_report import report

    text = report(again.path)
    assert "| level1/26_GELU_ | honest persistent GELU | 10.5 | 10.7, 10.9 (2) | +2.9% ✓ | 8% |" in text
    assert "2 honest evaluations: 0 not correct, 0 with a timing flag." in text


def test_the_ladder_table_judges_every_run_and_shows_the_echos_slow_mode(tmp_path):
    bench = _small_kernels_module()
    journal = bench.Journal(tmp_path)
    rung = {"problem": bench.LADDER_PROBLEM, "solution": "ladder_5us.py", "label": "ladder 5 us"}
    journal.write("outside|ladder5", {"part": "outside", **rung, "rotating_ms": 0.0060})
    raw = [[0.016, 0.009]] * 3 + [[0.016, 0.016]]  # one echo window of four in the slow mode
    for run, ms in enumerate((0.0062, 0.0071)):
        journal.write(
            f"evaluator|mps|ladder5|{run}",
            {
                "part": "evaluator",
                "mode": "mps",
                "kind": "ladder",
                **rung,
                "run": run,
                "status": "correct",
                "sol_ms": ms,
                "timing": {"raw_calls_ms": raw},
            },
        )
    from small_kernels_report import report

    text = report(journal.path)
    assert "| mps | ladder 5 us | 6 | +0.20 ✓, +1.10 ✗ |" in text
    assert "9.0 / 9.0 / 9.0 (25% slow)" in text


def test_the_report_orders_rungs_by_size_and_names_a_rejections_check(tmp_path):
    bench = _small_kernels_module()
    journal = bench.Journal(tmp_path)
    for us in (100, 5, 20):
        rung = {"problem": bench.LADDER_PROBLEM, "solution": f"ladder_{us}us.py", "label": f"ladder {us} us"}
        journal.write(f"outside|ladder{us}", {"part": "outside", **rung, "rotating_ms": us * 1e-3})
        journal.write(
            f"evaluator|mps-gate-spin|ladder{us}|0",
            {"part": "evaluator", "mode": "mps-gate-spin", "kind": "ladder", **rung, "run": 0, "status": "correct"}
            | {"sol_ms": us * 1e-3},
        )
    sol = "examples/solutions/level1/26_GELU_.py"
    journal.write(
        f"evaluator|mps-gate-spin|level1/26_GELU_|{sol}|0",
        {"part": "evaluator", "mode": "mps-gate-spin", "kind": "honest", "problem": "level1/26_GELU_"}
        | {"solution": sol, "label": "example", "run": 0, "status": "incorrect", "failed_check": "impossible_time"},
    )
    two = "benchmarks/solutions/level1/23_Softmax_two_streams.py"
    journal.write(
        "outside|two",
        {"part": "outside", "problem": "level1/23_Softmax", "solution": two, "label": "two streams"}
        | {"rotating_ms": 0.0140, "gated_in_process_ms": 0.0070},
    )
    journal.write(
        f"evaluator|mps-gate-spin|level1/23_Softmax|{two}|0",
        {"part": "evaluator", "mode": "mps-gate-spin", "kind": "honest", "problem": "level1/23_Softmax"}
        | {"solution": two, "label": "two streams", "run": 0, "status": "correct", "sol_ms": 0.0072},
    )
    from small_kernels_report import report

    text = report(journal.path)
    assert "| level1/23_Softmax | two streams | 14 | 7.2 (1) | -48.6% ✗ | 8% | 7 | +2.9% ✓ |" in text
    rows = [line for line in text.splitlines() if line.startswith("| mps-gate-spin | ladder")]
    assert [row.split(" | ")[1] for row in rows] == ["ladder 5 us", "ladder 20 us", "ladder 100 us"]
    assert "## Honest solutions, MPS, the gate's spin kernel at GO" in text
    assert "incorrect (impossible_time); no flags" in text


def test_the_gate_modes_diagnostic_ends_a_variant_that_hangs_instead_of_waiting(monkeypatch):
    import multiprocessing as mp

    from kernelbench_v3.evaluate.protocol.gate import GateWords, private_block

    monkeypatch.syspath_prepend(str(BENCHMARKS / "diagnostics"))
    import gate_modes_gpu as diag

    monkeypatch.setattr(diag, "RING_LIMIT_S", 0.05)
    monkeypatch.setattr(diag, "CLIENT_LIMIT_S", 0.05)
    _, view, _ = private_block()
    with pytest.raises(TimeoutError, match="DONE read 0"):
        diag._ring(GateWords(view), 1)  # a call that never writes DONE
    ours, theirs = mp.Pipe()
    with pytest.raises(TimeoutError, match="client 0 said nothing"):
        diag._receive(ours, 0)
    theirs.send(("error", "client 0: RuntimeError: no CUDA"))
    with pytest.raises(RuntimeError, match="no CUDA"):
        diag._receive(ours, 0)
    theirs.send(200)
    assert diag._receive(ours, 0) == 200


def test_the_gate_modes_paths_name_each_step_of_a_call_and_enqueue_it_so(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS / "diagnostics"))
    import gate_modes_gpu as diag

    from kernelbench_v3.evaluate.protocol.gate import GATE_BYTES, GateWords

    assert diag.path_of("path_fused") == ("both", ("fused", "none", "kernel"), ["path"])
    assert diag.path_of("path_spin_graph_kernel") == ("both", ("spin", "graph", "kernel"), ["path"])
    assert diag.path_of("spin_mixed") == ("mixed", ("spin", "torch", "write"), ["torch", "triton"])
    assert diag.path_of("two") == ("two", ("wait", "torch", "write"), ["torch", "torch"])
    with pytest.raises(ValueError, match="path_<hold>"):
        diag.path_of("path_spin_graph")
    for variant in diag.VARIANTS:  # every listed variant parses
        if variant != "edges":
            diag.path_of(variant)

    steps = []

    class Driver:
        def spin_geq(self, stream, address, seq):
            steps.append(("spin", address, seq))

        def wait_geq(self, stream, address, seq):
            steps.append(("wait", address, seq))

        def write(self, stream, address, seq):
            steps.append(("write", address, seq))

        def echo_call(self, stream, go, done, seq):
            steps.append(("kernel", go, done, seq))

    class Stream:  # torch.cuda.stream(None-like) needs a real stream: patch it out
        pass

    import contextlib

    import torch

    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    gate = GateWords(memoryview(bytearray(GATE_BYTES)))
    gate.go_device, gate.done_device = 64, 48
    work = lambda: steps.append(("work",))  # noqa: E731
    diag._enqueue(("spin", "graph", "kernel"), gate, Driver(), Stream(), 5, work)
    assert steps == [("spin", 64, 5), ("work",), ("kernel", 64, 48, 5)]
    steps.clear()
    diag._enqueue(("wait", "none", "write"), gate, Driver(), Stream(), 6, work)
    assert steps == [("wait", 64, 6), ("work",), ("write", 48, 6)]
    steps.clear()
    diag._enqueue(("fused", "none", "kernel"), gate, Driver(), Stream(), 7, work)
    assert steps == [("kernel", 64, 48, 7)]  # the fused echo: nothing else


def test_the_gate_modes_diagnostic_closes_its_block_with_the_words_viewing_it(monkeypatch):
    from multiprocessing import shared_memory

    monkeypatch.syspath_prepend(str(BENCHMARKS / "diagnostics"))
    import gate_modes_gpu as diag

    from kernelbench_v3.evaluate.protocol.gate import GATE_BYTES, GateWords

    block = shared_memory.SharedMemory(create=True, size=4096 * 2)
    gates = [GateWords(block.buf[i * 4096 : i * 4096 + GATE_BYTES]) for i in range(2)]
    gates[1].go = 7
    diag._close(block, gates)  # the H200 lost every variant to a BufferError here
    with pytest.raises(FileNotFoundError):
        shared_memory.SharedMemory(name=block.name)  # unlinked too


def test_the_report_shows_the_gate_modes_beside_it_and_the_clis_wall_parts(tmp_path):
    bench = _small_kernels_module()
    journal = bench.Journal(tmp_path)
    for run, cli_s in enumerate((0.8, 1.2)):
        journal.write(
            f"cli|level1/23_Softmax|{run}",
            {
                "part": "cli",
                "problem": "level1/23_Softmax",
                "run": run,
                "wall_s": 13.0,
                "duration_s": 10.0,
                "status": "correct",
                "wall_phase_s": {"cli_import": cli_s, "reference": 2.0},
            },
        )
    modes = [
        {
            "variant": "path_fused",
            "mode": "mps",
            "client0": {"p10_us": 3.9, "p50_us": 4.2, "p90_us": 4.8, "slow_share": 0.01},
        },
        {"variant": "edges", "mode": "mps", "torch_us_per_kernel": 0.918, "triton_us_per_kernel": 0.804},
        {"variant": "spin", "mode": "mps", "error": "TimeoutError: call 3"},
    ]
    (tmp_path / "gate_modes.jsonl").write_text("".join(json.dumps(m) + "\n" for m in modes))
    from small_kernels_report import report

    text = report(journal.path)
    assert "each part of the CLI's wall (`wall_phase_s`): cli_import 1.00, reference 2.00." in text
    assert "| mps | path_fused | 3.9 / 4.2 / 4.8 (1%) |  |  |" in text
    assert "torch 0.918 µs, Triton 0.804 µs" in text and "| mps | spin |  |  | TimeoutError: call 3 |" in text


def test_the_spread_probe_counts_where_blocks_land_and_the_report_shows_it(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS / "diagnostics"))
    import hold_spread_gpu as spread
    import torch

    # (SM, start ns, end ns, value) per block; the rows past the grid are another launch's
    packed = torch.tensor([[3, 100, 2100, 0], [3, 150, 2300, 0], [5, 120, 1200, 0], [9, 0, 0, 0]])
    one = spread.placement(packed, grid=3)
    assert one == {"sms": 2, "most_on_one_sm": 2, "span_us": 2.2, "start_spread_us": 0.05}
    assert spread.placement(packed, grid=3, exit_at=40)["open_us"] == 0.06  # first start 100 ns, deadline 40
    opened = [{**one, "open_us": 0.06}, {**one, "sms": 3, "most_on_one_sm": 1, "open_us": 0.08}]
    entry = spread._summary("hold", 256, 3, 2000, opened)
    assert entry["sms_median"] == 2.5 and entry["sms_min"] == 2 and entry["release_delay_ns"] == 2000
    assert entry["open_us_median"] == 0.07 and entry["hold_threads"] is None
    assert "open_us_median" not in spread._summary("idle", 256, 3, None, [one])
    assert spread.HOLD_BLOCK_THREADS[-1] * 32 == 2048  # the smallest takes every block slot of an H100 SM
    assert b".entry kbv3_spread(" in spread.SPREAD_PTX and "%smid" in spread.SPREAD_PTX.decode()
    assert 0 in spread.DELAYS_NS  # the sixth lease's HOLD, as the control

    bench = _small_kernels_module()
    journal = bench.Journal(tmp_path)
    journal.write("probe", {"part": "probe"})
    lines = [
        {"variant": "probe", "mps": True, "gpu": "NVIDIA H100"},
        {**{k: v for k, v in entry.items() if k != "open_us_median"}, "variant": "idle", "release_delay_ns": None},
        entry,
        {"variant": "hold", "threads": 128, "grid": 132, "release_delay_ns": 0, "error": "HoldRefused: busy"},
        {**entry, "variant": "absorb", "release_delay_ns": 0},
        {**entry, "hold_threads": 64},
    ]
    (tmp_path / "hold_spread.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    assert spread.best_hold_threads(tmp_path / "hold_spread.jsonl") is None  # blocks of 64 did no better
    with (tmp_path / "hold_spread.jsonl").open("a") as f:
        f.write(json.dumps({**entry, "hold_threads": 128, "sms_median": 3.0}) + "\n")
    assert spread.best_hold_threads(tmp_path / "hold_spread.jsonl") == 128
    from small_kernels_report import report

    text = report(journal.path)
    assert "NVIDIA H100, MPS True" in text
    assert "| 256 x 3 | idle GPU | 2.5 (2) | 1.5 | 2.2 | 0.05 |  |" in text
    assert "| 256 x 3 | HOLD, delay 2000 ns | 2.5 (2) | 1.5 | 2.2 | 0.05 | 0.07 |" in text
    assert "| 256 x 3 | HOLD in blocks of 64, delay 2000 ns | 2.5 (2) |" in text
    assert "| 128 x 132 | HOLD, delay 0 ns | HoldRefused: busy |" in text
    assert "| 256 x 3 | HOLD, an empty kernel of its shape ahead, delay 0 ns | 2.5 (2) |" in text
    assert b".entry kbv3_empty(" in spread.EMPTY_PTX


def test_the_exits_probe_records_where_and_when_each_hold_block_leaves(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS / "diagnostics"))
    import hold_exits_gpu as exits

    body = exits.EXITS_PTX.decode()
    assert body.count("%smid") == 1 and body.count("JOIN2:") == 1 and body.rstrip("\0").endswith("}\n")
    assert exits.exit_spread([[1, 100], [2, 1600]], exit_at=1000) == {
        "exit_spread_us": 1.5,
        "last_exit_late_us": 0.6,
        "first_exit_late_us": -0.9,
    }
    entry = exits.summary(2000, [{"exit_spread_us": 1.5, "sms": 3}, {"exit_spread_us": 2.5, "sms": 5}])
    assert entry["exit_spread_us_median"] == 2.0 and entry["exit_spread_us_max"] == 2.5 and entry["sms_median"] == 4.0


def test_the_best_gate_is_the_complete_ladder_closest_to_the_rotating_figures(tmp_path):
    bench = _small_kernels_module()
    journal = bench.Journal(tmp_path)
    rung = {"problem": bench.LADDER_PROBLEM, "solution": "ladder_5us.py", "label": "ladder 5 us"}
    journal.write("outside|ladder5", {"part": "outside", **rung, "rotating_ms": 0.0060})
    runs = {
        "mps": (0.0086, 0.0088),  # the default spin: +2.6 us
        "mps-gate-pdl-go": (0.0067, 0.0069),  # +0.7 to +0.9
        "mps-gate-flat": (0.0061, None),  # closest, but one run was not scored
        "mps-gate-spin-echo-graph": (0.0060, 0.0060),  # another echo: not a gate's figure
    }
    for mode, figures in runs.items():
        for run, ms in enumerate(figures):
            journal.write(
                f"evaluator|{mode}|ladder5|{run}",
                {"part": "evaluator", "mode": mode, "kind": "ladder", **rung, "run": run}
                | {"status": "correct" if ms else "incorrect", "sol_ms": ms},
            )
    from small_kernels_report import best_gate

    gate, figures = best_gate(journal.path)
    assert gate == "pdl-go" and set(figures) == {"spin", "pdl-go"}
    assert figures["spin"] == pytest.approx(2.7) and figures["pdl-go"] == pytest.approx(0.8)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert best_gate(empty) == ("spin", {})


def test_the_outside_figures_under_mps_sit_beside_those_without(tmp_path):
    bench = _small_kernels_module()
    journal = bench.Journal(tmp_path)
    sol = "benchmarks/solutions/level1/47_Sum_reduction_over_a_dimension_two_stage.py"
    row = {"problem": "level1/47_Sum_reduction_over_a_dimension", "solution": sol, "label": "two-stage sum"}
    journal.write("outside|sum", {"part": "outside", **row, "rotating_ms": 0.01207, "gated_in_process_ms": 0.01188})
    journal.write("outside-mps|sum", {"part": "outside-mps", **row, "rotating_ms": 0.0131})
    from small_kernels_report import report

    text = report(journal.path)
    assert "| level1/47_Sum_reduction_over_a_dimension | two-stage sum | 12.07 | 13.1 | 11.88 | n/a |" in text


def test_loop_steps_reads_each_records_loop_and_names_a_bad_line(monkeypatch, tmp_path, capsys):
    import json

    from kernelbench_v3.evaluate.supervisor.timing.measure import LOOP_STEPS

    monkeypatch.syspath_prepend(str(BENCHMARKS / "diagnostics"))
    import loop_steps

    journal = tmp_path / "results.parquet.journal.jsonl"
    rows = [{"kbv3_batch_journal": 1}]
    for i, share in enumerate((1.0, 0.5, None)):
        loop = {step: 0.1 * (i + 1) for step in LOOP_STEPS}
        rows.append(
            {"problem_id": f"p{i}", "timing_details": {"calls": {"calls": 20}, "judge_share": share, "loop_ms": loop}}
        )
    rows.append({"problem_id": "untimed", "timing_details": {}})
    journal.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    assert loop_steps.main([str(journal), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "3 timed records" in out and "| draw | 0.200 | 0.300 |" in out
    assert "| p2 | 20 | None |" in out and "| p1 |" not in out  # only the costliest one
    journal.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"results.parquet.journal.jsonl:1: not JSON"):
        loop_steps.main([str(journal)])
