"""MPS for the timed calls: on by default wherever a kbv3 process times on a GPU.

Without MPS the GPU time-slices between the supervisor's CUDA context and the solution's: a gated
window holds a context switch of about 150 us whose jitter is as wide as a small kernel, so calls
under about 0.15 ms are not resolved (docs/timing.md). Under an MPS daemon the processes share
one server context, the echo's window falls to about 10 us and small kernels are timed.

`daemon(ask)` owns the lifecycle, once per kbv3 process (eval, eval-batch, serve, baselines and
demo all run inside one block; `kbv3 eval` uses `starting(ask)`, the same start on a thread beside
its own start-up, and waits for it with `Start.ready()` just before its first CUDA context):

- **Used, not started**, when a daemon already serves this user: `CUDA_MPS_PIPE_DIRECTORY`
  names a folder with a control pipe, or the driver's default folder has one.
- **Started**, otherwise, when asked, the control program exists and every GPU is in compute mode
  Default: a private daemon (pipe and log folders under a fresh `kbv3-mps-*` temporary folder,
  so no other user's daemon or setting is touched), before this process opens a CUDA context (a
  context joins MPS only when it is created). Children inherit the folders through the
  environment.
- **Stopped by a reaper, never waited for.** The control daemon's `quit` waits for its clients,
  and this process is one of them until it exits, so quitting from inside cost a 60 s timeout per
  `kbv3 eval`. Instead a small detached process (`mps_reaper.py`, standard library only) holds
  the read end of a pipe whose write end only this process (and what it forks) holds. When the
  last holder is gone, by a normal exit, Ctrl-C or `kill -9`, the reaper asks the daemon to
  quit, kills what is left of it after a grace period, and removes the folder.
- **Nothing left behind**: `sweep_stale()` (run before every start) ends the daemons of
  `kbv3-mps-*` folders of this user whose owner and reaper are both gone.

`in_use()` says whether this process's contexts go through a daemon; the record keeps it
(`timing_details.mps`) and the baseline cache keys on it. `cuda_context_lost()` says whether this
process's context still runs work: under MPS a fatal fault of one client reaches every client of
the server, the supervisor's too (seen on the H200), and an evaluation in a lost context could
only produce `error` records, so it refuses to start (`CudaContextLost`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from .mps_reaper import CONTROL, LOG_ENV, PIPE_ENV, daemon_pids, end_daemon
from .process_tree import alive

ASK_ENV = "KBV3_MPS"  # "0" (or false/no/off): no daemon, as --no-mps; anything else: the default
DRIVER_DEFAULT_PIPE = Path("/tmp/nvidia-mps")  # where contexts look when PIPE_ENV is unset
ROOT_PREFIX = "kbv3-mps-"
OWNER_FILE, REAPER_FILE = "owner.pid", "reaper.pid"
START_WAIT_S = 10.0  # the control pipe appears within this after `-d` returns
REAPER = Path(__file__).with_name("mps_reaper.py")


def off_by_env() -> bool:
    return os.environ.get(ASK_ENV, "").strip().lower() in ("0", "false", "no", "off")


def wanted(no_mps: bool | None, device: str | None) -> bool:
    """Whether a verb should run under MPS: it times on a GPU (`no_mps` is None for verbs that do
    not), `--no-mps` and KBV3_MPS=0 did not turn it off, and the device is not the CPU."""
    return no_mps is False and device != "cpu" and not off_by_env()


def _pipe_has_control(folder: str | Path) -> bool:
    return bool(str(folder)) and (Path(folder) / "control").exists()


def in_use() -> bool:
    """Whether a daemon's control pipe is where this process's CUDA contexts will look for it."""
    folder = os.environ.get(PIPE_ENV, "")
    return _pipe_has_control(folder) if folder else _pipe_has_control(DRIVER_DEFAULT_PIPE)


def _default_compute_mode() -> bool:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_mode", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    modes = {line.strip() for line in out.splitlines() if line.strip()}
    return modes == {"Default"}


def _read_pid(path: Path) -> int:
    try:
        return int(path.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def sweep_stale(tmp: Path | None = None) -> list[Path]:
    """End the private daemons whose kbv3 process and reaper are both gone (a reaper killed with
    its owner); the folders removed."""
    ended = []
    for root in Path(tmp or tempfile.gettempdir()).glob(f"{ROOT_PREFIX}*"):
        try:
            if not root.is_dir() or root.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        if alive(_read_pid(root / OWNER_FILE)) or alive(_read_pid(root / REAPER_FILE)):
            continue
        end_daemon(root, grace_s=2.0)
        ended.append(root)
    return ended


def _start(root: Path, env: dict[str, str]) -> bool:
    """`CONTROL -d` under `env`; True once its control pipe exists."""
    try:
        # No pipes: a daemon that kept an inherited pipe open would hold `run` until its timeout.
        done = subprocess.run(
            [CONTROL, "-d"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30
        )
        started = done.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
    deadline = time.monotonic() + START_WAIT_S
    while started and not _pipe_has_control(root / "pipe"):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return started


# A bare client: the driver alone (no torch), one context on device 0, its creation checked.
_CLIENT_PROBE = """
import ctypes, sys
cu = ctypes.CDLL("libcuda.so.1")
ctx, dev = ctypes.c_void_p(), ctypes.c_int()
ok = cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
ok = ok and cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0  # as torch makes its context
ok = ok and cu.cuCtxSetCurrent(ctx) == 0 and cu.cuCtxSynchronize() == 0
sys.exit(0 if ok else 1)
"""
CLIENT_PROBE_S = 30.0


def _client_works(env: dict[str, str]) -> bool:
    """Whether a CUDA context can be made through the daemon (a separate bare process)."""
    try:
        probe = [sys.executable, "-I", "-c", _CLIENT_PROBE]
        return subprocess.run(probe, env=env, capture_output=True, timeout=CLIENT_PROBE_S).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _spawn_reaper(root: Path) -> subprocess.Popen:
    """The detached reaper; it ends the daemon once the pipe on its stdin reaches end of file.
    `-I`: no site packages and no package import, so it costs a bare interpreter (tens of ms)."""
    return subprocess.Popen(
        [sys.executable, "-I", str(REAPER), str(root), str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # out of the terminal's process group: Ctrl-C does not reach it
        close_fds=True,
    )


class Start:
    """A daemon started beside the caller's own work (`starting`): the start and the client probe
    run on a thread with an environment of their own, so nothing of this process changes until
    `ready()`, which waits for them and only then points this process's contexts at the daemon.
    Nothing may open a CUDA context before `ready()` (a context joins MPS only when it is made);
    what is forked meanwhile gets the folders later (`solution.zygote` passes them per spawn)."""

    def __init__(self, ask: bool, clock=time.monotonic):
        self.clock = clock
        self.started = False
        self.daemon_done_at: float | None = None  # when the daemon answered (or was given up)
        self.daemon_s: float | None = None  # the start, as it ran beside the caller
        self.probe_s: float | None = None  # the client probe, likewise
        self.env: dict[str, str] = {}
        self.reaper: subprocess.Popen | None = None
        self._saved: dict[str, str | None] = {}
        self._waited = False
        self._thread: threading.Thread | None = None
        if ask and not in_use() and shutil.which(CONTROL) is not None:
            self._thread = threading.Thread(target=self._run, name="kbv3-mps-start", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        began = self.clock()
        try:
            if not _default_compute_mode():
                return
            sweep_stale()
            root = Path(tempfile.mkdtemp(prefix=ROOT_PREFIX))
            (root / OWNER_FILE).write_text(str(os.getpid()))
            env = {PIPE_ENV: str(root / "pipe"), LOG_ENV: str(root / "log")}
            for folder in env.values():
                Path(folder).mkdir(mode=0o700)
            self.reaper = _spawn_reaper(root)  # first: a daemon that starts is always somebody's to end
            (root / REAPER_FILE).write_text(str(self.reaper.pid))
            started = _start(root, {**os.environ, **env})
            self.daemon_done_at = self.clock()
            self.daemon_s = self.daemon_done_at - began
            if started and not _client_works({**os.environ, **env}):
                # A daemon whose server cannot start (a container without the IPC it needs, say)
                # would fail every CUDA context of this process: end it and run without.
                started = False
                end_daemon(root, grace_s=2.0)
            self.probe_s = self.clock() - self.daemon_done_at
            self.started, self.env = started, env
        except Exception:  # noqa: BLE001 - a daemon that cannot start: the work runs without
            self.started = False
        finally:
            if self.daemon_done_at is None:
                self.daemon_done_at = self.clock()

    def ready(self) -> bool:
        """Wait for the start; whether this process's contexts now go through a daemon."""
        if self._thread is not None:
            self._thread.join()
        if self.started and not self._waited:
            self._saved = {k: os.environ.get(k) for k in self.env}
            os.environ.update(self.env)
        self._waited = True
        return in_use()

    def end(self) -> None:
        """Let the reaper go once every process forked from this one has exited too (closing
        this process's end of its pipe); nothing here waits for the daemon."""
        if self._thread is not None:
            self._thread.join()  # a start still under way is somebody's to end: wait for it
        if self.reaper is not None and self.reaper.stdin is not None:
            with contextlib.suppress(OSError):
                self.reaper.stdin.close()
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved = {}


@contextlib.contextmanager
def starting(ask: bool) -> Iterator[Start]:
    """The daemon's start beside the block (`Start`); the block calls `ready()` before its first
    CUDA context. Never raises for a missing or failing daemon."""
    start = Start(ask)
    try:
        yield start
    finally:
        start.end()


@contextlib.contextmanager
def daemon(ask: bool) -> Iterator[bool]:
    """Run the block under MPS when asked and possible (module docstring); yields whether this
    process's contexts go through a daemon. Never raises for a missing or failing daemon: the
    evaluations then run without, and the records say so."""
    with starting(ask) as start:
        yield start.ready()


class CudaContextLost(RuntimeError):
    """This process's CUDA context has a sticky error (an earlier fault); start a new process."""


_UNUSABLE: list[str] = []  # why the evaluator itself found this process's context unfit


def mark_context_unusable(why: str) -> None:
    """The evaluator left work of its own blocked in this context (a stream waiting on words a
    solution corrupted): no further CUDA evaluation may run in this process."""
    _UNUSABLE.append(why)


def cuda_context_lost() -> str:
    """Why this process's CUDA context can no longer run work (a sticky error: an illegal
    address, a trap; or `mark_context_unusable`), or '' when it can or was never opened."""
    if _UNUSABLE:
        return f"this process's CUDA context is unfit: {_UNUSABLE[0]}; evaluate in a new process"
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return ""
    try:
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - any error here means the context is gone
        return (
            f"this process's CUDA context is lost ({str(exc).splitlines()[0][:200]}); under MPS a fault of "
            "one client reaches every client of the server: evaluate in a new process"
        )
    return ""


__all__ = [
    "CONTROL",
    "CudaContextLost",
    "cuda_context_lost",
    "LOG_ENV",
    "PIPE_ENV",
    "Start",
    "daemon",
    "daemon_pids",
    "end_daemon",
    "in_use",
    "starting",
    "sweep_stale",
    "wanted",
]
