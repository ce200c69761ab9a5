"""`kbv3 eval`'s own start-up (`cli.eval_run`): the zygote launched first, the supervisor's import
beside the MPS daemon's start, the daemon waited for before any CUDA probe, the zygote closed in a
named step, every second in the record's `wall_phase_s`; with fakes and a fake clock."""

from __future__ import annotations

import json
import types

import pytest

from kernelbench_v3.cli import eval_run
from kernelbench_v3.cli.main import build_parser
from kernelbench_v3.evaluate import Record, Wall
from tests.fakes import FakeClock
from tests.paths import EXAMPLES

SOFTMAX = str(EXAMPLES / "level1/23_Softmax.py")


@pytest.fixture
def fakes(monkeypatch):
    clock, calls = FakeClock(), []

    def spend(name: str, seconds: float):
        def act(*args, **kwargs):
            calls.append(name)
            clock.now += seconds

        return act

    zygote = types.SimpleNamespace(start_s=2.5)

    def launch(device, served=False, server_module=None):
        assert served, "kbv3 eval asks for its zygote from the warm server (solution.zygote_server)"
        assert server_module == "kernelbench_v3.cli.warm_server", "a server it launches serves whole evaluations too"
        spend(f"launch {device}", 0.01)()
        return zygote

    def evaluate(request, **kwargs):
        spend("evaluate", 5.0)()
        return Record(
            problem_id=request.problem_id,
            device=request.device,
            duration_s=5.0,
            phase_s={"reference": 1.0, "solution_timing": 4.0, "candidate": 4.0},
        )

    class FakeStart:
        daemon_done_at = None
        daemon_s, probe_s = 1.5, 0.75

        def ready(self):
            spend("ready", 0.5)()
            self.daemon_done_at = clock.now - 0.2  # the daemon answered; its probe took the rest
            return True

    monkeypatch.setattr("kernelbench_v3.evaluate.start_warm_zygote", launch)
    monkeypatch.setattr("kernelbench_v3.evaluate.close_warm_zygotes", spend("close", 0.1))
    monkeypatch.setattr("kernelbench_v3.evaluate.load_supervisor", spend("load", 1.0))
    monkeypatch.setattr("kernelbench_v3.evaluate.evaluate", evaluate)
    monkeypatch.setattr("kernelbench_v3.evaluate.device_name", lambda device: "GPU")
    monkeypatch.setattr(eval_run, "check_cuda", spend("check_cuda", 0.3))
    monkeypatch.setattr(eval_run, "default_device", spend("default_device", 0.0))
    return types.SimpleNamespace(clock=clock, calls=calls, start=FakeStart())


def _args(fakes, *extra: str):
    args = build_parser().parse_args(["eval", "--problem", "level1/23_Softmax", "--solution", SOFTMAX, *extra])
    args.wall, args.mps = Wall(clock=fakes.clock), fakes.start
    return args


def test_the_zygote_goes_first_and_the_daemon_is_ready_before_cuda_is_probed(fakes):
    record = eval_run.evaluate_here(_args(fakes, "--device", "cuda"), {})
    assert fakes.calls == ["launch cuda", "load", "ready", "check_cuda", "evaluate", "close"]
    parts = record.wall_phase_s
    assert list(parts) == [
        "cli_import",
        "zygote_launch",
        "supervisor_import",
        "mps_daemon",
        "mps_probe",
        "device_probe",
        "cli_args",
        "reference",
        "solution_timing",
        "evaluate_call",
        "teardown",
        "unattributed",
    ]
    assert (parts["supervisor_import"], parts["mps_daemon"], parts["mps_probe"]) == (1.0, 0.3, 0.2)
    assert (parts["device_probe"], parts["teardown"], parts["unattributed"]) == (0.3, 0.1, 0.0)
    assert record.wall_s == pytest.approx(sum(parts.values())) and record.wall_s == 6.91
    assert record.wall_background_s == {"zygote_start": 2.5, "mps_daemon_start": 1.5, "mps_probe": 0.75}


def test_without_device_the_zygote_waits_for_the_default_device(fakes, monkeypatch):
    monkeypatch.setattr(eval_run, "default_device", lambda: fakes.calls.append("default_device") or "cpu")
    record = eval_run.evaluate_here(_args(fakes), {})
    assert fakes.calls == ["load", "ready", "default_device", "launch cpu", "evaluate", "close"]
    assert record.device == "cpu" and list(record.wall_phase_s).index("zygote_launch") > 2


def test_a_failing_evaluation_still_closes_the_zygote(fakes, monkeypatch):
    def broken(request, **kwargs):
        raise ValueError("no such size")

    monkeypatch.setattr("kernelbench_v3.evaluate.evaluate", broken)
    with pytest.raises(ValueError):
        eval_run.evaluate_here(_args(fakes, "--device", "cpu"), {})
    assert fakes.calls[-1] == "close"


def test_as_the_program_eval_leaves_at_once_after_its_record_is_out(fakes, monkeypatch, capsys):
    from kernelbench_v3.cli import main as cli_main

    class Left(Exception):
        pass

    def leave(code):
        raise Left(code)

    monkeypatch.setattr("os._exit", leave)
    monkeypatch.setattr(cli_main, "_observed", lambda: False)  # as the program runs unwatched (not under coverage)
    argv = ["kbv3", "eval", "--problem", "level1/23_Softmax", "--solution", SOFTMAX, "--device", "cpu", "--json"]
    monkeypatch.setattr("sys.argv", argv)
    with pytest.raises(Left) as left:
        cli_main.main()
    record = json.loads(capsys.readouterr().out)  # written and flushed before the exit
    assert left.value.args == (1,) and record["problem_id"] == "level1/23_Softmax" and record["wall_phase_s"]
    assert fakes.calls[-1] == "close"  # the zygote closed in its step, before the exit
    assert cli_main.main(argv[1:]) == 1  # a caller's in-process run returns as before
    monkeypatch.setattr("sys.argv", ["kbv3", "ls", "--split", "h100"])
    assert cli_main.main() == 0  # other verbs leave through Python's shutdown


def test_a_profiled_eval_leaves_normally_so_the_profile_is_written(fakes, monkeypatch, capsys):
    import sys

    from kernelbench_v3.cli import main as cli_main

    monkeypatch.setattr("os._exit", lambda code: pytest.fail("left by os._exit under a profiler"))
    argv = ["kbv3", "eval", "--problem", "level1/23_Softmax", "--solution", SOFTMAX, "--device", "cpu", "--json"]
    monkeypatch.setattr("sys.argv", argv)
    previous = sys.getprofile()
    sys.setprofile(lambda frame, event, arg: None)  # as cProfile does
    try:
        assert cli_main._observed()
        code = cli_main.main()
    finally:
        sys.setprofile(previous)
    assert code == 1 and json.loads(capsys.readouterr().out)["problem_id"] == "level1/23_Softmax"
