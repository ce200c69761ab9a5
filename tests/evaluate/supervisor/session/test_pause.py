"""The solution's side is stopped between timed windows (`pause.ProcessPause`): the solution
process, what it started however it left its group, and the echo, so nothing of it runs on the
host while the supervisor writes the next window's inputs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelbench_v3.evaluate import EvalRequest, evaluate
from kernelbench_v3.evaluate.supervisor.session import Session, SessionLost, pause
from kernelbench_v3.evaluate.supervisor.session.pause import NotStopped, ProcessPause, descendants, why_running
from tests.paths import ATTACKS, EXAMPLES

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")

# A parent that starts a child in a session of its own, then spins; the child spins too.
FAMILY = """
import os, sys
if os.fork() == 0:
    os.setsid()
    while True:
        pass
print("forked", flush=True)
while True:
    pass
"""


def _state(pid: int) -> str:
    # /proc/<pid>/stat: "pid (comm) S ..."; the state follows the last ')'
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _wait_for(pid: int, states: str) -> str:
    deadline = time.monotonic() + 5
    while (state := _state(pid)) not in states and time.monotonic() < deadline:
        time.sleep(0.01)
    return state


class _Link:
    def send(self, message):
        pass

    def receive(self, timeout_s):
        return {"kind": "finished", "tampered": []}


@pytest.fixture
def family():
    proc = subprocess.Popen(
        [sys.executable, "-c", FAMILY], start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
    )
    assert proc.stdout.readline() == b"forked\n"
    (child,) = descendants(proc.pid)
    yield proc.pid, child
    for pid in (child, proc.pid):
        try:
            import os
            import signal

            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def test_a_paused_process_resumes_alone_and_what_it_started_stays_stopped(family):
    parent, child = family
    session = Session(_Link(), None, 0, 0, 0, pid=parent)
    session.pause()
    assert session.paused
    # The child left the parent's session and group; it is stopped as a descendant.
    assert _state(parent) == "T" and _state(child) == "T"  # pause returns once both stopped
    session.request({"kind": "finish"}, 5.0, ("finished",))  # any request resumes first
    assert not session.paused
    assert _wait_for(parent, "R") == "R"
    time.sleep(0.2)
    assert _state(child) == "T"  # a helper never runs beside its member's arming or window
    session.check_others_stopped()
    session.pause()  # the helper, stopped all along, passes the next pause's check


def test_a_helper_continued_behind_the_supervisors_back_ends_the_session(family):
    parent, child = family
    session = Session(_Link(), None, 0, 0, 0, pid=parent)
    session.pause()
    os.kill(child, signal.SIGCONT)  # as a POSIX timer or a child's exit signal set to SIGCONT would
    time.sleep(0.05)
    os.kill(child, signal.SIGSTOP)  # and it stops itself again before anyone looks
    assert _wait_for(child, "T") == "T"
    with pytest.raises(SessionLost, match="stopped means stopped: process .* ran while"):
        session.check_others_stopped()
    with pytest.raises(SessionLost, match="ran while"):
        session.pause()


def test_a_member_that_ran_while_paused_is_not_resumed(family):
    parent, _ = family
    session = Session(_Link(), None, 0, 0, 0, pid=parent)
    session.pause()
    os.kill(parent, signal.SIGCONT)  # it read the next inputs while the supervisor wrote them
    time.sleep(0.05)
    os.kill(parent, signal.SIGSTOP)
    assert _wait_for(parent, "T") == "T"
    with pytest.raises(SessionLost, match=f"process {parent} .*ran while"):
        session.resume()
    session.resume(check=False)  # the session is lost: the caller only lets it exit
    assert not session.paused


# Seizes a process and continues it from every stop, so a SIGSTOP never holds: what two helpers
# tracing each other do to the supervisor's pause.
TRACER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
target = int(sys.argv[1])
assert libc.ptrace(0x4206, target, 0, 0) == 0, ctypes.get_errno()  # PTRACE_SEIZE
print("seized", flush=True)
while True:
    _, status = os.waitpid(target, 0x40000000)  # __WALL
    if os.WIFEXITED(status) or os.WIFSIGNALED(status):
        break
    libc.ptrace(7, target, 0, 0)  # PTRACE_CONT, the stop signal dropped
"""


@pytest.mark.slow
def test_a_traced_process_fails_the_pause(family):
    parent, child = family
    tracer = subprocess.Popen([sys.executable, "-c", TRACER, str(child)], stdout=subprocess.PIPE)
    try:
        assert tracer.stdout.readline() == b"seized\n"
        pause = ProcessPause(root=parent, members=[parent])
        with pytest.raises(NotStopped, match=f"traced by process {tracer.pid}"):
            pause.stop()
        assert why_running(child) is not None
    finally:
        tracer.kill()
        tracer.wait()


def test_resuming_one_member_leaves_the_others_stopped(family):
    parent, child = family
    other = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    try:
        pause = ProcessPause(root=parent, members=[parent, other.pid])
        pause.stop()
        assert all(_wait_for(p, "Tt") in "Tt" for p in (parent, child, other.pid))
        pause.resume(other.pid)
        assert _wait_for(other.pid, "R") == "R"
        assert _state(parent) in "Tt" and _state(child) in "Tt"  # not the other member's
    finally:
        other.kill()
        other.wait()


# A subreaper (as the zygote is) that starts a member; the member double-forks a daemon in a
# session of its own, which is re-parented to the subreaper, and then spins.
SUBREAPER = """
import ctypes, os, subprocess, sys, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
member = subprocess.Popen([sys.executable, "-c", sys.argv[1]], start_new_session=True, stdout=subprocess.PIPE)
daemon = member.stdout.readline().decode().strip()
print(member.pid, daemon, flush=True)
time.sleep(120)
"""
MEMBER = """
import os, time
r, w = os.pipe()
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()  # out of the member's group too
        os.write(w, str(os.getpid()).encode() + b"\\n")
        while True:
            pass
    os._exit(0)
os.wait()
print(os.read(r, 64).decode().strip(), flush=True)
while True:
    pass
"""


def test_an_orphan_stays_stopped_when_its_member_resumes():
    root = subprocess.Popen([sys.executable, "-c", SUBREAPER, MEMBER], start_new_session=True, stdout=subprocess.PIPE)
    try:
        member, daemon = (int(x) for x in root.stdout.readline().split())
        assert _wait_for(daemon, "R") == "R" and daemon in descendants(root.pid)
        assert daemon not in descendants(member)  # re-parented to the subreaper
        pause = ProcessPause(root=root.pid, members=[member])
        pause.stop()
        assert _wait_for(member, "Tt") in "Tt" and _wait_for(daemon, "Tt") in "Tt"
        pause.resume(member)
        assert _wait_for(member, "R") == "R"
        time.sleep(0.2)
        assert _state(daemon) in "Tt"  # nobody's: it never runs again before the reap
        # (one that stays in the member's process group is resumed with it, and runs only in its windows)
    finally:
        import os
        import signal

        for pid in descendants(root.pid):
            os.kill(pid, signal.SIGKILL)
        root.kill()
        root.wait()


def test_a_side_of_too_many_processes_ends_the_session(family):
    from kernelbench_v3.evaluate.supervisor.session import SessionLost

    parent, child = family
    session = Session(_Link(), None, 0, 0, 0, pid=parent, pauser=ProcessPause(parent, [parent], max_processes=1))
    with pytest.raises(SessionLost, match="holds 2 processes"):
        session.pause()
    assert _wait_for(parent, "Tt") in "Tt" and _wait_for(child, "Tt") in "Tt"  # stopped all the same


def test_pausing_a_process_that_is_gone_is_harmless():
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    proc.wait()
    session = Session(_Link(), None, 0, 0, 0, pid=proc.pid)
    session.pause()
    session.resume()
    assert not session.paused
    assert not Session(_Link(), None, 0, 0, 0).paused  # no pid: nothing to pause


@pytest.mark.slow
@pytest.mark.parametrize(
    "solution",
    [EXAMPLES / "level1" / "23_Softmax.py", ATTACKS / "fork_setsid_sleeper.py"],
    ids=["honest", "forks_a_setsid_child"],
)
def test_every_window_finds_the_solutions_whole_side_stopped_with_its_inputs_written(tmp_path, monkeypatch, solution):
    from kernelbench_v3.evaluate.supervisor.timing.timed_process import TimedProcess

    seen: list[dict[int, str]] = []  # at each window's opening: the state of everything below the zygote
    real_ring = TimedProcess.ring

    def ring(self):
        # Armed, its inputs written: nothing of the solution's side may run until the window opens.
        seen.append({pid: _wait_for(pid, "TtZ") for pid in descendants(self.session.pauser.root)})
        return real_ring(self)

    monkeypatch.setattr(TimedProcess, "ring", ring)
    request = EvalRequest(
        "level1/23_Softmax",
        solution,
        device="cpu",
        sizes={"batch_size": 4, "dim": 96},
        baseline=False,
        seeds=(42,),
        timing_seconds=1.0,
        scan_source=False,
    )
    record = evaluate(request, cache_dir=tmp_path)
    assert record.correct, (record.failed_check, record.error)
    assert len(seen) > 5
    running = [(i, pid, state) for i, states in enumerate(seen) for pid, state in states.items() if state not in "TtZ"]
    assert not running, (running, len(seen))
    processes = max(len(states) for states in seen)
    assert processes >= (3 if "fork" in solution.name else 2), seen  # the solution, the echo (and its child)


# A parent that starts a sleeping helper every 0.2 s, as a thread of a solution process could.
BREEDER = """
import os, time
while True:
    if os.fork() == 0:
        time.sleep(60)
        os._exit(0)
    time.sleep(0.2)
"""


@pytest.mark.slow
def test_a_process_born_while_a_member_ran_alone_ends_the_session():
    proc = subprocess.Popen([sys.executable, "-c", BREEDER], start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        pauser = ProcessPause(proc.pid, [proc.pid])
        pauser.stop()  # the first stop: what existed before it is found and stopped, as allowed
        pauser.resume(proc.pid)  # the member alone: it breeds a helper within 0.2 s
        time.sleep(0.5)
        with pytest.raises(NotStopped, match="appeared on the solution's side while a member was to run alone"):
            pauser.stop()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_record_is_kept_only_once_it_holds_still():
    # The thread read as stopped a moment before it left the CPU: its first record moved once,
    # then never again. Keeping the first read failed an honest GEMM on the H200.
    reads = iter([{"7": "100 5 3"}, {"7": "180 5 4"}, {"7": "180 5 4"}])
    clock = iter(range(100))
    record = pause.settled_runs(
        1, deadline=50, read=lambda pid: next(reads), clock=lambda: next(clock), sleep=lambda s: None
    )
    assert record == {"7": "180 5 4"}


def test_a_record_that_never_holds_still_is_a_running_process():
    counter = iter(range(10_000))
    clock = iter(range(10_000))
    with pytest.raises(pause.NotStopped, match="still ran"):
        pause.settled_runs(
            1,
            deadline=5,
            read=lambda pid: {"7": f"{next(counter)} 0 0"},
            clock=lambda: next(clock),
            sleep=lambda s: None,
        )
