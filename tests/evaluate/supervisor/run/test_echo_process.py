"""The trusted echo's process (`supervisor.run.echo_process`): forked while the solution runs its
cases, taken up by timing, and let go cleanly when timing never comes."""

from __future__ import annotations

import pytest

from kernelbench_v3.evaluate import EvalRequest, evaluate
from kernelbench_v3.evaluate.protocol.messages import Finish
from kernelbench_v3.evaluate.supervisor.run import echo_process
from kernelbench_v3.evaluate.supervisor.run.echo_process import EchoProcess
from kernelbench_v3.evaluate.supervisor.session import SessionLost
from tests.paths import EXAMPLES


class FakeReply:
    def __init__(self, kind: str):
        self.kind = kind


class FakeSession:
    def __init__(self, ready: str = "ready", lost: bool = False):
        self.ready, self.lost, self.sent = ready, lost, []

    def receive_reply(self, timeout_s, expect):
        if self.lost:
            raise SessionLost("the solution process exited or was killed")
        return FakeReply(self.ready)

    def request(self, message, timeout_s, expect):
        self.sent.append(type(message).__name__)
        return FakeReply(expect[0]), 0.0


class Opener:
    """`open_session` that hands out the given sessions in turn and notes each arena."""

    def __init__(self, *sessions, fails: int = 0):
        self.sessions, self.fails, self.arenas = list(sessions), fails, []

    def __call__(self, folder, arena):
        assert (folder / "solution.py").read_text().startswith("import torch")
        if self.fails:
            self.fails -= 1
            raise OSError("the zygote could not fork")
        self.arenas.append(arena)
        return self.sessions.pop(0)


def _echo(tmp_path, opener, setups=None) -> EchoProcess:
    def setup(process, path):
        (setups if setups is not None else []).append(path)
        return FakeReply("setup_done")

    return EchoProcess(opener, setup, tmp_path, start_limit_s=1.0)


def test_an_echo_forked_ahead_is_the_one_timing_starts(tmp_path):
    first = FakeSession()
    opener, setups = Opener(first), []
    echo = _echo(tmp_path, opener, setups)
    echo.fork()
    process, arena = echo.start()
    assert process is first and arena is opener.arenas[0] and len(opener.arenas) == 1
    assert setups == [str(tmp_path / "echo" / "solution.py")]
    echo.drop()  # taken up: nothing left to let go
    assert first.sent == []
    arena.close()


def test_without_a_fork_ahead_or_after_a_failed_one_start_forks_then(tmp_path):
    later = FakeSession()
    echo = _echo(tmp_path, Opener(later, fails=1))
    echo.fork()  # fails quietly
    assert echo.ahead is None
    process, arena = echo.start()
    assert process is later
    arena.close()


def test_an_echo_that_does_not_start_is_session_lost_and_its_arena_closed(tmp_path):
    opener = Opener(FakeSession(lost=True))
    echo = _echo(tmp_path, opener)
    echo.fork()
    with pytest.raises(SessionLost):
        echo.start()
    assert opener.arenas[0]._map.closed  # its memory is gone


def test_an_unused_echo_is_finished_as_a_used_one_is(tmp_path, monkeypatch):
    unused = FakeSession()
    opener = Opener(unused)
    echo = _echo(tmp_path, opener)
    echo.fork()
    echo.drop()
    assert unused.sent == [Finish.__name__] and echo.ahead is None and opener.arenas[0]._map.closed
    echo.drop()  # nothing twice
    assert unused.sent == [Finish.__name__]


def test_dropping_an_echo_that_never_answers_gives_up_within_its_limit(tmp_path, monkeypatch):
    waited = []
    gone = FakeSession(lost=True)
    original = gone.receive_reply
    gone.receive_reply = lambda timeout_s, expect: (waited.append(timeout_s), original(timeout_s, expect))[1]
    echo = _echo(tmp_path, Opener(gone))
    echo.fork()
    echo.drop()  # raises nothing: the reap ends what is left
    assert waited == [echo_process.DROP_LIMIT_S] and gone.sent == []


@pytest.mark.slow
def test_an_evaluation_forks_the_echo_before_the_cases_and_leaves_nothing_behind(tmp_path, monkeypatch):
    events: list[str] = []
    for name in ("fork", "start", "drop"):
        original = getattr(EchoProcess, name)

        def noted(self, _original=original, _name=name):
            events.append(_name)
            return _original(self)

        monkeypatch.setattr(EchoProcess, name, noted)
    options = dict(device="cpu", timeout_s=120.0, seeds=(42,), other_shape=False, timing_seconds=0.2, baseline=False)
    options["sizes"] = {"batch_size": 4, "dim": 96}
    honest = evaluate(
        EvalRequest("level1/23_Softmax", EXAMPLES / "level1/23_Softmax.py", **options), cache_dir=tmp_path
    )
    assert honest.correct and honest.sol_ms, (honest.failed_check, honest.error)
    assert events == ["fork", "start", "drop"]
    assert not any(w.startswith("leftover_processes") for w in honest.warnings)
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "import torch\n\n\nclass ModelNew(torch.nn.Module):\n"
        "    def forward(self, x):\n        return torch.zeros_like(x)\n"
    )
    events.clear()
    record = evaluate(EvalRequest("level1/23_Softmax", wrong, **options), cache_dir=tmp_path)
    assert record.status == "incorrect" and "not timed" in (record.timing_skipped or ""), record.error
    assert events == ["fork", "drop"]  # forked ahead, never timed, let go
    assert not any(w.startswith("leftover_processes") for w in record.warnings), record.warnings
