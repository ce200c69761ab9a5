"""The sandbox's seccomp filter (`solution.seccomp`), tested for real against this kernel: inside
it nothing can trace a process or continue a stopped one, and honest work (threads, forks,
other signals) goes on. Every filter is installed in a forked child (`test_sandbox.in_child`)."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

import pytest

if sys.platform != "linux":
    pytest.skip("seccomp is Linux-only", allow_module_level=True)

from kernelbench_v3.evaluate.solution import sandbox, seccomp
from tests.evaluate.solution.test_sandbox import in_child

PR_SET_NO_NEW_PRIVS = 38
PTRACE_TRACEME, PTRACE_ATTACH = 0, 16


def _errno_of(result: int) -> str:
    return "ok" if result == 0 else os.strerror(ctypes.get_errno())


def _state(pid: int) -> str:
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]


def _settle(pid: int) -> str:
    # SIGSTOP takes effect asynchronously: the state is R or S until the process gets there.
    deadline = time.monotonic() + 2
    while (state := _state(pid)) != "T" and time.monotonic() < deadline:
        time.sleep(0.001)
    return state


def _probe() -> dict:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    refused = seccomp.install()
    helper = os.fork()
    if helper == 0:
        while True:
            time.sleep(1)
    try:
        os.kill(helper, signal.SIGSTOP)
        _settle(helper)
        out = {"refused": refused}
        out["attach"] = _errno_of(libc.ptrace(PTRACE_ATTACH, helper, 0, 0))
        out["traceme"] = _errno_of(libc.ptrace(PTRACE_TRACEME, 0, 0, 0))
        for name, send in {
            "kill": lambda: os.kill(helper, signal.SIGCONT),
            "killpg": lambda: os.killpg(os.getpgid(helper), signal.SIGCONT),
            "pidfd": lambda: signal.pidfd_send_signal(os.pidfd_open(helper), signal.SIGCONT),
        }.items():
            try:
                send()
                out[name] = "ok"
            except OSError as exc:
                out[name] = os.strerror(exc.errno)
        out["pdeathsig"] = _errno_of(libc.prctl(1, int(signal.SIGCONT), 0, 0, 0))
        out["helper"] = _settle(helper)  # a continued helper sleeps (S) and never reads T again
        # Honest work still runs: other signals, threads (clone3 falls back to clone), forks.
        os.kill(helper, signal.SIGKILL)
        os.waitpid(helper, 0)
        helper = 0
        got = []
        signal.signal(signal.SIGUSR1, lambda *_: got.append(1))
        os.kill(os.getpid(), signal.SIGUSR1)
        out["usr1"] = got
        box = []
        worker = threading.Thread(target=box.append, args=(1,))
        worker.start()
        worker.join()
        child = os.fork()
        if child == 0:
            os._exit(7)
        out["thread"], out["fork"] = box, os.WEXITSTATUS(os.waitpid(child, 0)[1])
        return out
    finally:
        if helper:
            os.kill(helper, signal.SIGKILL)


def test_inside_the_filter_nothing_traces_or_continues_a_stopped_process():
    out = in_child(_probe)
    assert out["refused"] == ""
    denied = os.strerror(1)  # EPERM
    assert {k: out[k] for k in ("attach", "traceme", "kill", "killpg", "pidfd", "pdeathsig")} == dict.fromkeys(
        ("attach", "traceme", "kill", "killpg", "pidfd", "pdeathsig"), denied
    )
    assert out["helper"] == "T"  # still stopped
    assert out["usr1"] == [1] and out["thread"] == [1] and out["fork"] == 7


def test_the_sandbox_installs_it(tmp_path):
    report = in_child(lambda: sandbox.enter_sandbox([tmp_path]).to_dict())
    assert report["tracing_denied"], report["notes"]


def test_every_jump_lands_inside_the_program():
    for machine in ("x86_64", "aarch64"):
        code = seccomp._assemble(seccomp.program(machine))
        for i, op in enumerate(code):
            if op.code & 0x07 == 0x05:  # BPF_JMP
                assert i + 1 + max(op.jt, op.jf) < len(code)
        assert code[-1].code == code[-2].code == code[-3].code == 0x06  # allow, EPERM, ENOSYS


def _fork_after_the_seal() -> dict:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    ran, sealed = [], threading.Event()
    early = threading.Thread(target=lambda: sealed.wait(30) and ran.append(_try_fork()))  # exists before the seal
    early.start()
    refused = seccomp.forbid_forks()
    sealed.set()  # only now does the early thread try to fork: under a seal installed after it started
    late = threading.Thread(target=lambda: ran.append("thread"))
    late.start()
    late.join()
    early.join()
    return {"refused": refused, "fork": _try_fork(), "ran": ran}


def _try_fork() -> str:
    try:
        pid = os.fork()
    except OSError as exc:
        return os.strerror(exc.errno)
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return "forked"


def test_once_timing_begins_no_thread_can_start_a_process_but_threads_still_start():
    out = in_child(_fork_after_the_seal)
    assert out["refused"] == ""
    denied = os.strerror(1)
    assert out["fork"] == denied  # the main thread
    assert sorted(out["ran"]) == sorted(["thread", denied])  # a thread started before the seal too


def test_the_no_fork_program_jumps_inside_itself():
    for machine in ("x86_64", "aarch64"):
        code = seccomp._assemble(seccomp.no_fork_program(machine))
        for i, op in enumerate(code):
            if op.code & 0x07 == 0x05:
                assert i + 1 + max(op.jt, op.jf) < len(code)
