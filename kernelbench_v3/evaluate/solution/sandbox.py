"""The sandbox a solution process enters before it imports the solution (Linux only).

It owns the kernel-side confinement of untrusted code: a process forked from the trusted
zygote calls `enter_sandbox([scratch])` while it is still single-threaded, and from then on:

- Files: a Landlock ruleset makes the whole tree read-only (read, list, execute) and gives full
  access beneath the writable folders only, so nothing the solution writes can land where a
  trusted process reads it later. Every filesystem right the kernel's ABI knows is handled,
  REFER included: without it a hard link or rename could carry a file outside into the writable
  folder and be written there. IOCTL_DEV is not handled: GPU drivers work through ioctls.
- Devices: writing is allowed on an allow-list of device nodes (null, zero, the GPU nodes),
  not beneath /dev: as root that would include raw disks (/dev/vda), /dev/kmsg and /dev/shm
  segments of other processes. CUDA also needs to write its own threads' /proc/self/task files.
- Network: a fresh network namespace (root: unshare; otherwise a user namespace of one uid),
  which cuts UDP and abstract Unix sockets too, and for ABI >= 4 Landlock denies TCP bind and
  connect with no port allowed.
- The supervisor: Landlock forbids ptrace (so /proc/<pid>/mem) of any process outside the
  domain; ABI >= 6 also scopes signals and abstract Unix sockets to the domain.
- The pause: a seccomp filter (`seccomp`) denies ptrace and every way to send SIGCONT inside the
  domain too, so no process of the solution can cancel or undo the supervisor's SIGSTOP.
- Root: the capabilities that step around all of this (load a kernel module, raise rlimits,
  ptrace, mount, raw I/O, reboot...) are dropped, bounding set included; only the DAC bypass
  stays, which Landlock still confines.
PR_SET_NO_NEW_PRIVS is set so no setuid binary can regain privileges. File descriptors open
before the call keep their rights: the caller must not leave trusted ones open.
Nothing here raises for a missing kernel feature: `SandboxReport` says what was applied and,
in `notes`, why the rest was not. `available()` tells the same without confining the caller.
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import platform
import resource
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

from . import seccomp

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # x86_64 and aarch64
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
# linux/landlock.h, LANDLOCK_ACCESS_FS_*: bits 0-12 since ABI 1
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_ABI1 = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3, 5 (IOCTL_DEV never handled)
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
PR_GET_DUMPABLE, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 3, 4, 24, 38
CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
_KEEP_CAPS = (1, 2)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH: reading files; Landlock still applies
_DEV_WRITABLE = ("null", "zero", "full", "random", "urandom", "tty", "nvidia*", "nvidia-caps", "kfd", "dri")

_libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None
if _libc is not None:
    _libc.syscall.restype = ctypes.c_long
_applied: SandboxReport | None = None


class _RulesetAttr(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in ("handled_access_fs", "handled_access_net", "scoped")]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1  # the kernel struct is packed: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@dataclass(frozen=True)
class SandboxReport:
    kind: Literal["landlock", "namespaces", "none"]
    landlock_abi: int
    network: Literal["netns", "landlock_tcp", "none"]
    signals_scoped: bool
    writable: tuple[str, ...]
    notes: tuple[str, ...]
    caps_dropped: bool = False
    tracing_denied: bool = False  # the seccomp filter holds: no ptrace, no SIGCONT

    def to_dict(self) -> dict:
        return {**asdict(self), "writable": list(self.writable), "notes": list(self.notes)}


def _syscall(nr: int, *args) -> int:
    res = _libc.syscall(ctypes.c_long(nr), *args)
    if res < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return res


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when it has none (or this is not Linux on x86_64/aarch64)."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"):
        return 0
    try:
        return _syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except OSError:
        return 0  # ENOSYS: too old; EOPNOTSUPP: built but disabled at boot


def set_limits(*, address_space_bytes: int | None, file_size_bytes: int | None, core: bool = False) -> None:
    """Hard and soft rlimits for this process (call before `enter_sandbox`, which drops the
    capability a root process needs to raise them back)."""
    if not core:  # a core dump would write the process's memory outside the sandbox's accounting
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if file_size_bytes:  # a larger write fails with EFBIG instead of filling the disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_bytes, file_size_bytes))
    if address_space_bytes:  # CPU-only runs: CUDA reserves far more address space than it uses
        resource.setrlimit(resource.RLIMIT_AS, (address_space_bytes, address_space_bytes))


def supervisor_hardening() -> bool:
    """Make the trusted process non-dumpable, so a same-uid non-root process cannot ptrace it or
    read /proc/<pid>/mem; whether it worked."""
    if _libc is None or _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        return False
    return _libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0


def _new_netns(notes: list[str]) -> bool:
    if os.geteuid() == 0 and _libc.unshare(CLONE_NEWNET) == 0:
        return True
    # Not root: a user namespace of one uid gives the right to make a network namespace. The
    # maps must be written now: Landlock will make /proc read-only.
    uid, gid = os.geteuid(), os.getegid()
    if _libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        notes.append(f"no network namespace: unshare failed ({os.strerror(ctypes.get_errno())})")
        return False
    dumpable = _libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)
    _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # a non-dumpable process's /proc/self is root's
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    except OSError as exc:
        notes.append(f"user namespace without id maps ({exc}); the process may misbehave")
    finally:
        _libc.prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0)
    return True


def _drop_caps(notes: list[str]) -> bool:
    # Root, or the owner of the user namespace made above (whose capabilities count only there).
    try:
        with open("/proc/self/status") as f:
            permitted = int(next(x for x in f if x.startswith("CapPrm:")).split()[1], 16)
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError, StopIteration):
        permitted, last = (1 << 64) - 1 if os.geteuid() == 0 else 0, 63
    if not permitted:
        return False
    # The bounding set first (it needs CAP_SETPCAP, dropped below): root regains it on execve.
    kept = [c for c in range(last + 1) if c not in _KEEP_CAPS and _libc.prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0]
    if kept:
        notes.append(f"capabilities {kept} stay in the bounding set")
    keep = sum(1 << c for c in _KEEP_CAPS) & permitted
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)(keep, keep, 0, 0, 0, 0)  # {effective, permitted, inheritable} x 2
    if _libc.capset(header, data) != 0:
        notes.append(f"capset failed ({os.strerror(ctypes.get_errno())}): the process keeps its capabilities")
        return False
    return True


def _landlock(abi: int, writable: list[str], allow_network: bool, notes: list[str]) -> bool:
    fs = _FS_ABI1 | (REFER if abi >= 2 else 0) | (TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(
        fs,
        0 if allow_network or abi < 4 else NET_BIND_TCP | NET_CONNECT_TCP,
        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0,
    )
    size = 8 if abi < 4 else 16 if abi < 6 else 24  # an older kernel rejects fields it does not know
    dev_rw = READ_FILE | WRITE_FILE | (TRUNCATE if abi >= 3 else 0)
    rules = [("/", EXECUTE | READ_FILE | READ_DIR)] + [(p, fs) for p in writable]
    # CUDA fails to initialize (error 304) unless it can write (fopen "w": TRUNCATE too) per-thread
    # /proc files of threads it starts later; these are this process's own, not the supervisor's.
    rules.append(("/proc/self/task", dev_rw | READ_DIR))
    for pattern in _DEV_WRITABLE:
        rules += [(p, dev_rw | (READ_DIR if os.path.isdir(p) else 0)) for p in sorted(glob.glob("/dev/" + pattern))]
    try:
        ruleset = _syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    except OSError as exc:
        notes.append(f"landlock_create_ruleset failed: {exc}")
        return False
    try:
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a device node that vanished; the rest still stands
            try:
                rule = ctypes.byref(_PathBeneath(access, fd))
                _syscall(
                    _SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), rule, ctypes.c_uint32(0)
                )
            except OSError as exc:
                if path == "/" or path in writable:  # without these the process could not work
                    notes.append(f"landlock_add_rule({path}) failed: {exc}")
                    return False
            finally:
                os.close(fd)
        _syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
        return True
    except OSError as exc:
        notes.append(f"landlock_restrict_self failed: {exc}")
        return False
    finally:
        os.close(ruleset)


def enter_sandbox(writable: Sequence[str | os.PathLike], *, allow_network: bool = False) -> SandboxReport:
    """Confine this process for good (see the module docstring); what was applied.

    Call it once, in a single-threaded process: Landlock confines only the calling thread and a
    user namespace needs a single thread. A second call with the same folders returns the first
    report."""
    global _applied
    paths = [os.path.realpath(os.fspath(p)) for p in writable]
    for p in paths:
        if not os.path.isdir(p):
            raise NotADirectoryError(f"writable folder {p!r} does not exist or is not a folder")
    if _applied is not None:
        if set(_applied.writable) != set(paths):
            raise RuntimeError(f"enter_sandbox was already called with {_applied.writable}")
        return _applied
    if sys.platform != "linux":
        return SandboxReport("none", 0, "none", False, tuple(paths), (f"no sandbox on {sys.platform}",))
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        raise RuntimeError(f"enter_sandbox needs a single-threaded process; this one has {threads} threads")
    notes: list[str] = []
    abi = landlock_abi()
    netns = False if allow_network else _new_netns(notes)
    caps = _drop_caps(notes)
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:  # Landlock needs it too (EPERM otherwise)
        notes.append(f"PR_SET_NO_NEW_PRIVS failed ({os.strerror(ctypes.get_errno())})")
    locked = abi > 0 and _landlock(abi, paths, allow_network, notes)
    refused = seccomp.install()  # needs NO_NEW_PRIVS (set above); inherited by every fork and thread
    if refused:
        notes.append(refused)
    if abi == 0:
        notes.append("no Landlock in this kernel: files outside the writable folders are not protected")
    elif locked and abi < 4 and not netns and not allow_network:
        notes.append(f"Landlock ABI {abi} < 4 cannot deny TCP")
    if locked and abi < 6:
        notes.append(f"Landlock ABI {abi} < 6 cannot scope signals: the supervisor can be signalled")
    if allow_network:
        notes.append("network allowed by the caller")
    network = "netns" if netns else "landlock_tcp" if locked and abi >= 4 and not allow_network else "none"
    kind = "landlock" if locked else "namespaces" if netns else "none"
    _applied = SandboxReport(kind, abi, network, locked and abi >= 6, tuple(paths), tuple(notes), caps, not refused)
    return _applied


def available(*, allow_network: bool = False) -> SandboxReport:
    """What `enter_sandbox` would apply here, found in a throwaway forked child; this process is
    left as it was."""
    if sys.platform != "linux" or _applied is not None:
        return _applied or SandboxReport("none", 0, "none", False, (), (f"no sandbox on {sys.platform}",))
    with tempfile.TemporaryDirectory(prefix="kbv3-sandbox-probe-") as scratch:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                os.write(w, json.dumps(enter_sandbox([scratch], allow_network=allow_network).to_dict()).encode())
            finally:
                os._exit(0)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            raw = f.read()
        os.waitpid(pid, 0)
    if not raw:
        return SandboxReport("none", landlock_abi(), "none", False, (), ("the probe process died",))
    d = json.loads(raw)
    return SandboxReport(**{**d, "writable": (), "notes": tuple(d["notes"])})
