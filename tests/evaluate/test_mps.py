"""The MPS daemon's lifecycle (`evaluate.mps`), against a stand-in control program
(`fake_mps_control.py`) and a stand-in `nvidia-smi`: used when one runs, started once, never waited
for at exit, never left behind, also by a kbv3 process killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernelbench_v3.evaluate import mps
from tests.paths import REPO

FAKE = Path(__file__).with_name("fake_mps_control.py")


@pytest.fixture
def fake_gpu_host(tmp_path, monkeypatch):
    """PATH with the fake control program and an nvidia-smi that says compute mode Default; a
    private temporary folder; no MPS folders in the environment."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / mps.CONTROL).symlink_to(FAKE)
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho Default\n")
    smi.chmod(0o755)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(mps.tempfile, "tempdir", str(tmp))
    monkeypatch.setattr(mps, "DRIVER_DEFAULT_PIPE", tmp_path / "no-default-daemon")
    monkeypatch.setattr(mps, "_client_works", lambda env: True)  # no CUDA here: the daemon is the fake
    for name in (mps.PIPE_ENV, mps.LOG_ENV, mps.ASK_ENV):
        monkeypatch.delenv(name, raising=False)
    return tmp


def _roots(tmp: Path) -> list[Path]:
    return sorted(tmp.glob(f"{mps.ROOT_PREFIX}*"))


def _wait_until(cond, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def test_wanted_only_for_verbs_that_time_on_a_gpu_and_not_turned_off(monkeypatch):
    monkeypatch.delenv(mps.ASK_ENV, raising=False)
    assert mps.wanted(False, None) and mps.wanted(False, "cuda")
    assert not mps.wanted(None, "cuda")  # a verb without --device/--no-mps never times
    assert not mps.wanted(True, "cuda") and not mps.wanted(False, "cpu")
    monkeypatch.setenv(mps.ASK_ENV, "0")
    assert not mps.wanted(False, "cuda")


def test_not_asked_or_no_control_program_starts_nothing_and_leaves_the_environment(fake_gpu_host, monkeypatch):
    before = dict(os.environ)
    with mps.daemon(False) as used:
        assert used is False and mps.PIPE_ENV not in os.environ
    monkeypatch.setattr(mps.shutil, "which", lambda name, path=None: None)
    with mps.daemon(True) as used:
        assert used is False and mps.PIPE_ENV not in os.environ
    assert dict(os.environ) == before and not _roots(fake_gpu_host)


def test_a_gpu_not_in_compute_mode_default_gets_no_daemon(fake_gpu_host, monkeypatch):
    monkeypatch.setattr(mps, "_default_compute_mode", lambda: False)
    with mps.daemon(True) as used:
        assert used is False
    assert not _roots(fake_gpu_host)


def test_a_daemon_already_serving_this_user_is_used_not_started(fake_gpu_host, tmp_path, monkeypatch):
    theirs = tmp_path / "their-pipe"
    theirs.mkdir()
    (theirs / "control").touch()
    monkeypatch.setenv(mps.PIPE_ENV, str(theirs))
    with mps.daemon(True) as used:
        assert used is True and os.environ[mps.PIPE_ENV] == str(theirs)
    assert not _roots(fake_gpu_host) and (theirs / "control").exists()


@pytest.mark.slow
def test_started_once_and_ended_after_the_block_without_waiting_for_it(fake_gpu_host):
    with mps.daemon(True) as used:
        assert used is True and mps.in_use()
        (root,) = _roots(fake_gpu_host)
        pipe = Path(os.environ[mps.PIPE_ENV])
        assert pipe == root / "pipe" and mps.daemon_pids(pipe)
        # A client of the daemon that outlives the block: quit must wait for it, the block not.
        client = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
        (pipe / "clients").write_text(str(client.pid))
    assert mps.PIPE_ENV not in os.environ
    assert root.exists()  # the reaper is still waiting for the client: the block did not wait
    client.wait()
    assert _wait_until(lambda: not root.exists())
    assert not mps.daemon_pids(pipe)


_KILLED_OWNER = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, {repo!r})
    from kernelbench_v3.evaluate import mps
    mps._client_works = lambda env: True  # no CUDA here: the daemon is the fake
    with mps.daemon(True) as used:
        print(os.environ[mps.PIPE_ENV], flush=True)
        sys.stdin.readline()
        os.kill(os.getpid(), signal.SIGKILL)
    """
)


@pytest.mark.slow
def test_a_kbv3_process_killed_by_sigkill_leaves_no_daemon_behind(fake_gpu_host):
    owner = subprocess.Popen(
        [sys.executable, "-c", _KILLED_OWNER.format(repo=str(REPO))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    pipe = Path(owner.stdout.readline().strip())
    assert (pipe / "control").exists() and mps.daemon_pids(pipe)
    owner.stdin.write("go\n")
    owner.stdin.flush()
    assert owner.wait(timeout=30) == -signal.SIGKILL
    assert _wait_until(lambda: not pipe.parent.exists())
    assert not mps.daemon_pids(pipe)
    with mps.daemon(True) as used:  # and the next evaluation starts its own
        assert used is True
    assert _wait_until(lambda: not _roots(fake_gpu_host))


@pytest.mark.slow
def test_a_daemon_whose_owner_and_reaper_are_gone_is_swept_before_the_next_start(fake_gpu_host):
    root = fake_gpu_host / f"{mps.ROOT_PREFIX}stale"
    (root / "pipe").mkdir(parents=True)
    (root / "log").mkdir()
    env = {**os.environ, mps.PIPE_ENV: str(root / "pipe"), mps.LOG_ENV: str(root / "log")}
    subprocess.run([mps.CONTROL, "-d"], env=env, check=True, timeout=30)
    dead = subprocess.Popen(["true"])
    dead.wait()
    (root / mps.OWNER_FILE).write_text(str(dead.pid))
    (root / mps.REAPER_FILE).write_text(str(dead.pid))
    live = fake_gpu_host / f"{mps.ROOT_PREFIX}live"
    live.mkdir()
    (live / mps.OWNER_FILE).write_text(str(os.getpid()))  # its owner still runs: kept
    assert mps.daemon_pids(root / "pipe")
    assert mps.sweep_stale(fake_gpu_host) == [root]
    assert not root.exists() and live.exists()
    assert not mps.daemon_pids(root / "pipe")


def test_a_lost_cuda_context_refuses_the_next_cuda_evaluation_with_a_clear_error(monkeypatch):
    import types

    from kernelbench_v3.evaluate import CudaContextLost, EvalRequest, evaluate
    from tests.paths import EXAMPLES

    def synchronize():
        raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore")

    lost = types.SimpleNamespace(cuda=types.SimpleNamespace(is_initialized=lambda: True, synchronize=synchronize))
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "torch", lost)
        why = mps.cuda_context_lost()
    assert "illegal memory access" in why and "new process" in why and "more" not in why
    assert mps.cuda_context_lost() == ""  # this process's own (CPU) torch: nothing lost
    monkeypatch.setattr(mps, "cuda_context_lost", lambda: why)
    with pytest.raises(CudaContextLost, match="new process"):
        evaluate(EvalRequest("level1/23_Softmax", EXAMPLES / "level1/23_Softmax.py", device="cuda"))


@pytest.mark.slow
def test_a_daemon_no_client_can_use_is_ended_and_the_process_runs_without(fake_gpu_host, monkeypatch):
    monkeypatch.setattr(mps, "_client_works", lambda env: False)  # its server cannot start, say
    before = dict(os.environ)
    with mps.daemon(True) as used:
        assert used is False and mps.PIPE_ENV not in os.environ
    assert dict(os.environ) == before
    assert _wait_until(lambda: not _roots(fake_gpu_host))


@pytest.mark.slow
def test_a_start_beside_the_callers_work_changes_nothing_here_until_ready(fake_gpu_host):
    with mps.starting(True) as start:
        assert mps.PIPE_ENV not in os.environ  # the thread starts it with an environment of its own
        assert start.ready() is True  # waits for the start: then this process's contexts go through it
        (root,) = _roots(fake_gpu_host)
        assert os.environ[mps.PIPE_ENV] == str(root / "pipe") and mps.daemon_pids(root / "pipe")
        assert start.daemon_done_at is not None and start.daemon_s >= 0 and start.probe_s >= 0
        assert start.ready() is True  # a second wait changes nothing
    assert mps.PIPE_ENV not in os.environ
    assert _wait_until(lambda: not _roots(fake_gpu_host))


def test_a_start_that_is_not_possible_leaves_the_environment_and_says_no(fake_gpu_host, monkeypatch):
    monkeypatch.setattr(mps, "_default_compute_mode", lambda: False)
    before = dict(os.environ)
    with mps.starting(True) as start:
        assert start.ready() is False and start.daemon_done_at is not None
    assert dict(os.environ) == before and not _roots(fake_gpu_host)
