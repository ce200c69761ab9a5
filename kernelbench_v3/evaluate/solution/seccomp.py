"""The seccomp filter of the sandbox: no tracing, and no way to continue a stopped process.

The supervisor stops the solution's side between timed windows (`supervisor.session.pause`). Two
processes of the solution could trace each other and cancel each SIGSTOP, or one could send
SIGCONT to a helper the supervisor stopped; Landlock allows both inside its domain, and
PR_SET_DUMPABLE does not help (a process sets itself dumpable again, and PTRACE_TRACEME asks no
permission). A seccomp filter is inherited by every fork and thread and can never be removed, so
once `install()` ran these calls fail with EPERM in the whole tree:

- ptrace, process_vm_readv/writev, pidfd_getfd, process_madvise (reach into another process);
- kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo, pidfd_send_signal with SIGCONT;
- prctl(PR_SET_PDEATHSIG, SIGCONT), fcntl(F_SETSIG, SIGCONT) and clone with SIGCONT as the exit
  signal (a parent's death, I/O readiness or a child's exit delivering SIGCONT);
- clone3 fails with ENOSYS, because its exit signal sits behind a pointer the filter cannot read
  (glibc then falls back to clone).

`forbid_forks()` stacks a second filter on every thread (TSYNC) when the CPU timing begins: from
then on fork, vfork and every clone that is not a thread fail with EPERM, so no new process of
the solution's can work beside the timed one, in the arming gap or a window.

A POSIX timer or mq_notify can still deliver SIGCONT (their sigevent is behind a pointer too),
and the kernel continues a stopped, newly orphaned process group: the pause's scheduler records
catch what those run (`supervisor.session.pause`). Other architectures and the x32 and i386 system call
ABIs get EPERM for every call. Linux on x86_64 and aarch64 only; `install()` says whether it held.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import signal
import sys
from collections.abc import Callable
from typing import Any

PR_SET_PDEATHSIG, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 1, 22, 2
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 1, 1
CLONE_THREAD = 0x00010000
F_SETSIG = 10
CSIGNAL = 0xFF  # the exit-signal bits of clone's flags
SIGCONT = int(signal.SIGCONT)
_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}  # AUDIT_ARCH_*
_X32_BIT = 0x40000000
# Syscall numbers by architecture (asm/unistd.h); pidfd_* and process_madvise are common.
_NR = {
    "x86_64": dict(
        ptrace=101,
        process_vm_readv=310,
        process_vm_writev=311,
        kill=62,
        tkill=200,
        tgkill=234,
        rt_sigqueueinfo=129,
        rt_tgsigqueueinfo=297,
        prctl=157,
        fcntl=72,
        clone=56,
        clone3=435,
        fork=57,
        vfork=58,
        seccomp=317,
    ),
    "aarch64": dict(
        ptrace=117,
        process_vm_readv=270,
        process_vm_writev=271,
        kill=129,
        tkill=130,
        tgkill=131,
        rt_sigqueueinfo=138,
        rt_tgsigqueueinfo=240,
        prctl=167,
        fcntl=25,
        clone=220,
        clone3=435,
        seccomp=277,
    ),
}
for _table in _NR.values():
    _table.update(pidfd_send_signal=424, pidfd_getfd=438, process_madvise=440)
DENIED = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise")
# Calls denied when an argument (by index) is SIGCONT, after an optional (index, value) guard.
SIGCONT_ARG: dict[str, tuple[int, tuple[int, int] | None]] = {
    "kill": (1, None),
    "tkill": (1, None),
    "tgkill": (2, None),
    "rt_sigqueueinfo": (1, None),
    "rt_tgsigqueueinfo": (2, None),
    "pidfd_send_signal": (1, None),
    "prctl": (1, (0, PR_SET_PDEATHSIG)),
    "fcntl": (2, (1, F_SETSIG)),
}

# Classic BPF (linux/filter.h, linux/seccomp.h)
_LD_ABS, _JEQ, _JGE, _AND, _RET = 0x20, 0x15, 0x35, 0x54, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_NR_AT, _ARCH_AT = 0, 4


def _arg(i: int) -> int:
    return 16 + 8 * i  # the low 32 bits of argument i (little-endian), where int arguments live


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def program(machine: str) -> list[tuple[int, int | str, int | str, int]]:
    """The filter for `machine`, as (code, jump if true, jump if false, k); a jump is 0 (the next
    instruction) or the name of a final verdict: "allow", "deny" (EPERM), "nosys" (ENOSYS)."""
    nr = _NR[machine]
    ops: list[tuple[int, int | str, int | str, int]] = [
        (_LD_ABS, 0, 0, _ARCH_AT),
        (_JEQ, 0, "deny", _ARCH[machine]),
        (_LD_ABS, 0, 0, _NR_AT),
    ]
    if machine == "x86_64":
        ops.append((_JGE, "deny", 0, _X32_BIT))
    ops += [(_JEQ, "deny", 0, nr[name]) for name in DENIED]
    ops.append((_JEQ, "nosys", 0, nr["clone3"]))
    for name, (at, guard) in SIGCONT_ARG.items():
        block = [(_LD_ABS, 0, 0, _arg(at)), (_JEQ, "deny", "allow", SIGCONT)]
        if guard is not None:
            block[:0] = [(_LD_ABS, 0, 0, _arg(guard[0])), (_JEQ, 0, "allow", guard[1])]
        ops.append((_JEQ, 0, len(block), nr[name]))  # not this call: skip its block
        ops += block
    clone = [(_LD_ABS, 0, 0, _arg(0)), (_AND, 0, 0, CSIGNAL), (_JEQ, "deny", "allow", SIGCONT)]
    ops.append((_JEQ, 0, len(clone), nr["clone"]))
    ops += clone
    return ops + [(_RET, 0, 0, _ALLOW)]


def _assemble(ops: list[tuple[int, int | str, int | str, int]]) -> list[_Filter]:
    ends = {"allow": len(ops) - 1, "deny": len(ops), "nosys": len(ops) + 1}
    final = [(_RET, 0, 0, _ERRNO | errno.EPERM), (_RET, 0, 0, _ERRNO | errno.ENOSYS)]
    out = []
    for i, (code, jt, jf, k) in enumerate(ops + final):
        jt, jf = (ends[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf))
        out.append(_Filter(code, jt, jf, k))
    return out


def _load(build: Callable[[str], list], call: Callable[[Any, str, Any], int]) -> str:
    """Assemble `build(machine)` and hand it to the kernel through `call(libc, machine, prog)`
    (prctl for the first filter, the seccomp system call for a stacked one); '' when it held."""
    machine = platform.machine()
    if sys.platform != "linux" or machine not in _NR:
        return f"no seccomp filter on {sys.platform}/{machine}"
    code = _assemble(build(machine))
    prog = _Program(len(code), (_Filter * len(code))(*code))
    libc = ctypes.CDLL(None, use_errno=True)
    if call(libc, machine, ctypes.byref(prog)) != 0:
        return f"seccomp filter refused ({errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())})"
    return ""


def install() -> str:
    """Install the filter in this process (PR_SET_NO_NEW_PRIVS must be set, and the process should
    be single-threaded: the filter holds for the calling thread and what it starts); '' when it
    held, else why not."""
    return _load(program, lambda libc, machine, prog: libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog, 0, 0))


def no_fork_program(machine: str) -> list[tuple[int, int | str, int | str, int]]:
    """The second filter: no new process (fork, vfork, clone without CLONE_THREAD)."""
    nr = _NR[machine]
    ops: list[tuple[int, int | str, int | str, int]] = [
        (_LD_ABS, 0, 0, _ARCH_AT),
        (_JEQ, 0, "deny", _ARCH[machine]),
        (_LD_ABS, 0, 0, _NR_AT),
    ]
    ops += [(_JEQ, "deny", 0, nr[name]) for name in ("fork", "vfork") if name in nr]
    clone = [(_LD_ABS, 0, 0, _arg(0)), (_AND, 0, 0, CLONE_THREAD), (_JEQ, "deny", "allow", 0)]
    ops.append((_JEQ, 0, len(clone), nr["clone"]))
    ops += clone
    return ops + [(_RET, 0, 0, _ALLOW)]


def forbid_forks() -> str:
    """Stack the no-new-process filter on every thread of this process; '' when it held."""
    return _load(
        no_fork_program,
        lambda libc, machine, prog: libc.syscall(
            _NR[machine]["seccomp"], SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, prog
        ),
    )
