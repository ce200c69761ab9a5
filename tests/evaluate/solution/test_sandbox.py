"""The solution-process sandbox (`evaluate.sandbox`), tested for real against this kernel.

Every confinement happens in a child forked from the test process (which is never restricted):
the child runs one function, sends its result back as JSON through a pipe and leaves with
os._exit. Landlock tests are skipped where the kernel has no Landlock.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import traceback
from pathlib import Path

import pytest

if sys.platform != "linux":
    pytest.skip("the sandbox is Linux-only", allow_module_level=True)

from kernelbench_v3.evaluate.solution import sandbox

ABI = sandbox.landlock_abi()
needs_landlock = pytest.mark.skipif(ABI == 0, reason="this kernel has no Landlock (too old, or disabled at boot: lsm=)")


def in_child(fn, *args, timeout_s: float = 60.0) -> dict:
    """fn(*args) in a forked child; its JSON-able result (or the child's traceback, as a failure)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(r)
            try:
                out = {"ok": True, "result": fn(*args)}
            except BaseException:  # noqa: BLE001 - reported to the test as a failure
                out = {"ok": False, "error": traceback.format_exc()}
            os.write(w, json.dumps(out).encode())
        except BaseException:  # noqa: BLE001 - os._exit below, whatever happened
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        raw = f.read()
    _, status = os.waitpid(pid, 0)
    assert raw, f"the child sent nothing (wait status {status})"
    out = json.loads(raw)
    assert out["ok"], out["error"]
    return out["result"]


def attempt(fn, *args) -> str:
    """'ok', or the exception's name and errno code, e.g. 'PermissionError:EACCES'."""
    try:
        fn(*args)
        return "ok"
    except OSError as exc:
        if exc.errno is None:
            return type(exc).__name__
        return f"{type(exc).__name__}:{errno.errorcode.get(exc.errno, exc.errno)}"
    except Exception as exc:  # noqa: BLE001 - reported, not raised, so the test shows it
        return type(exc).__name__


def _write(path, mode="w"):
    with open(path, mode) as f:
        f.write("x")


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    outer = tmp_path / "outer"
    scratch = outer / "scratch"
    scratch.mkdir(parents=True)
    (outer / "trusted.txt").write_text("trusted")
    (scratch / "existing.txt").write_text("mine")
    return {"outer": outer, "scratch": scratch, "trusted": outer / "trusted.txt"}


@needs_landlock
def test_report_says_what_was_applied(tree):
    report = in_child(lambda: sandbox.enter_sandbox([tree["scratch"]]).to_dict())
    assert report["kind"] == "landlock" and report["landlock_abi"] == ABI
    assert report["network"] in (("netns", "landlock_tcp") if ABI >= 4 else ("netns",))
    assert report["signals_scoped"] == (ABI >= 6)
    assert report["writable"] == [os.path.realpath(tree["scratch"])]
    probe = sandbox.available()
    assert (probe.kind, probe.landlock_abi, probe.network) == (report["kind"], ABI, report["network"])
    assert sandbox.available(allow_network=True).network == "none"


@needs_landlock
def test_writes_outside_the_writable_folder_fail(tree):
    outer, scratch, trusted = tree["outer"], tree["scratch"], tree["trusted"]
    home = Path.home() / ".cache" if (Path.home() / ".cache").is_dir() else Path.home()
    stray = home / f"kbv3-sandbox-test-{os.getpid()}"

    def body():
        sandbox.enter_sandbox([scratch])
        os.symlink(trusted, scratch / "to_trusted")
        return {
            "create in parent folder": attempt(_write, outer / "new.txt"),
            "overwrite existing": attempt(_write, trusted),
            "append existing": attempt(_write, trusted, "a"),
            "truncate existing": attempt(os.truncate, trusted, 0) if ABI >= 3 else "PermissionError:skipped",
            "create in home/cache": attempt(_write, stray),
            "create in /tmp": attempt(_write, Path("/tmp") / stray.name),
            "rename outside": attempt(os.rename, trusted, outer / "moved.txt"),
            "unlink outside": attempt(os.unlink, trusted),
            "mkdir outside": attempt(os.mkdir, outer / "d"),
            "mkfifo outside": attempt(os.mkfifo, outer / "fifo"),
            "symlink outside": attempt(os.symlink, "/etc/passwd", outer / "sym"),
            "hard link outside": attempt(os.link, scratch / "existing.txt", outer / "hard"),
            "write through a symlink": attempt(_write, scratch / "to_trusted"),
        }, {
            # REFER: bringing an outside file into the writable folder would make it writable there
            "hard link in": attempt(os.link, trusted, scratch / "hard_in"),
            "rename in": attempt(os.rename, trusted, scratch / "moved_in"),
        }

    try:
        denied, refer = in_child(body)
    finally:
        for p in (stray, Path("/tmp") / stray.name):
            p.unlink(missing_ok=True)
    assert {k: v for k, v in denied.items() if not v.startswith("PermissionError")} == {}
    assert all(v in ("PermissionError:EACCES", "OSError:EXDEV") for v in refer.values()), refer
    assert trusted.read_text() == "trusted" and sorted(p.name for p in tree["outer"].iterdir()) == [
        "scratch",
        "trusted.txt",
    ]


@needs_landlock
def test_writes_inside_the_writable_folder_work(tree):
    scratch = tree["scratch"]

    def body():
        sandbox.enter_sandbox([scratch])
        (scratch / "new.txt").write_text("a")
        (scratch / "existing.txt").write_text("overwritten")
        os.truncate(scratch / "new.txt", 0)
        (scratch / "sub" / "deeper").mkdir(parents=True)
        (scratch / "sub" / "deeper" / "f").write_text("b")
        os.rename(scratch / "sub" / "deeper" / "f", scratch / "g")
        os.symlink("g", scratch / "link")
        os.unlink(scratch / "new.txt")
        (scratch / "sub" / "deeper").rmdir()
        return sorted(p.name for p in scratch.iterdir())

    assert in_child(body) == ["existing.txt", "g", "link", "sub"]
    assert (scratch / "existing.txt").read_text() == "overwritten"


@needs_landlock
def test_reads_anywhere_and_dev_null_still_work(tree):
    def body():
        sandbox.enter_sandbox([tree["scratch"]])
        with open("/dev/null", "w") as f:
            f.write("discarded")
        return {
            "trusted": tree["trusted"].read_text(),
            "module": Path(sandbox.__file__).read_text()[:3],
            "etc": len(os.listdir("/etc")) > 0,
            "urandom": len(open("/dev/urandom", "rb").read(8)),
            "disk": attempt(open, "/dev/vda", "r+b") if os.path.exists("/dev/vda") else "PermissionError:absent",
        }

    out = in_child(body)
    assert out["trusted"] == "trusted" and out["module"] == '"""' and out["etc"] and out["urandom"] == 8
    assert out["disk"].startswith("PermissionError")  # device nodes are allow-listed, not all of /dev


@needs_landlock
def test_network_is_cut(tree):
    server = socket.create_server(("127.0.0.1", 0))
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(f"\0kbv3-sandbox-test-{os.getpid()}")
    abstract.listen()
    port = server.getsockname()[1]

    def body(allow):
        report = sandbox.enter_sandbox([tree["scratch"]], allow_network=allow)
        out = {"network": report.network}
        out["connect"] = attempt(lambda: socket.create_connection(("127.0.0.1", port), timeout=5).close())
        with socket.socket() as s:
            out["bind"] = attempt(s.bind, ("127.0.0.1", 0))
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            out["abstract unix"] = attempt(s.connect, f"\0kbv3-sandbox-test-{os.getppid()}")
        return out

    try:
        cut = in_child(body, False)
        allowed = in_child(body, True)
    finally:
        server.close()
        abstract.close()
    assert cut["network"] in ("netns", "landlock_tcp")
    assert cut["connect"] != "ok" and cut["bind"] != "ok" and cut["abstract unix"] != "ok", cut
    if ABI >= 4:  # Landlock's own TCP rule answers before the (empty) namespace does
        assert cut["connect"] == cut["bind"] == "PermissionError:EACCES", cut
    assert allowed["connect"] == allowed["bind"] == "ok", allowed
    assert allowed["abstract unix"] == ("PermissionError:EPERM" if ABI >= 6 else "ok"), allowed


@needs_landlock
def test_supervisor_cannot_be_signalled_or_read(tree):
    parent = os.getpid()

    def body():
        report = sandbox.enter_sandbox([tree["scratch"]])
        return {
            "scoped": report.signals_scoped,
            "kill": attempt(os.kill, parent, 0),
            "mem": attempt(lambda: open(f"/proc/{parent}/mem", "rb").close()),
            "environ": attempt(lambda: open(f"/proc/{parent}/environ", "rb").read()),
        }

    out = in_child(body)
    assert out["mem"].startswith("PermissionError") and out["environ"].startswith("PermissionError"), out
    if ABI >= 6:
        assert out["scoped"] and out["kill"] == "PermissionError:EPERM", out


@needs_landlock
def test_root_capabilities_are_dropped(tree):
    if os.geteuid() != 0:
        pytest.skip("capabilities are dropped only for root")

    def body():
        report = sandbox.enter_sandbox([tree["scratch"]])
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        return {
            "dropped": report.caps_dropped,
            "status": Path("/proc/self/status").read_text(),
            "raise limit": attempt(resource.setrlimit, resource.RLIMIT_NOFILE, (hard + 1, hard + 1)),
        }

    out = in_child(body)
    caps = dict(line.split(":\t") for line in out["status"].splitlines() if line.startswith("Cap"))
    assert out["dropped"] and int(caps["CapEff"], 16) == int(caps["CapBnd"], 16) == 0b110, caps
    assert out["raise limit"] != "ok"


def test_address_space_limit():
    def body():
        status = Path("/proc/self/status").read_text().splitlines()
        vm = int(next(line for line in status if line.startswith("VmSize")).split()[1]) * 1024
        sandbox.set_limits(address_space_bytes=vm + (256 << 20), file_size_bytes=None)
        small = bytearray(64 << 20)
        try:
            bytearray(1 << 30)
            return "allocated", len(small)
        except MemoryError:
            return "MemoryError", len(small)

    assert in_child(body) == ["MemoryError", 64 << 20]


def test_file_size_limit(tmp_path):
    def body():
        sandbox.set_limits(address_space_bytes=None, file_size_bytes=1 << 16)
        import resource

        fd = os.open(tmp_path / "big", os.O_WRONLY | os.O_CREAT)
        written = 0
        try:
            while written < 1 << 20:
                written += os.write(fd, b"x" * 8192)
        except OSError as exc:
            return written, errno.errorcode[exc.errno], resource.getrlimit(resource.RLIMIT_CORE)
        return written, "", None

    assert in_child(body) == [1 << 16, "EFBIG", [0, 0]]


def test_supervisor_hardening():
    import ctypes

    def body():
        return sandbox.supervisor_hardening(), ctypes.CDLL(None).prctl(sandbox.PR_GET_DUMPABLE, 0, 0, 0, 0)

    assert in_child(body) == [True, 0]


def test_programming_errors_raise(tree):
    def body():
        out = {"missing": attempt(sandbox.enter_sandbox, [tree["outer"] / "nope"])}
        t = threading.Thread(target=threading.Event().wait, args=(5,), daemon=True)
        t.start()
        out["threads"] = attempt(sandbox.enter_sandbox, [tree["scratch"]])
        return out

    assert in_child(body) == {"missing": "NotADirectoryError", "threads": "RuntimeError"}


@needs_landlock
def test_second_call_returns_the_first_report(tree):
    def body():
        first = sandbox.enter_sandbox([tree["scratch"]])
        again = sandbox.enter_sandbox([str(tree["scratch"]) + "/"])
        return first == again, attempt(sandbox.enter_sandbox, [tree["outer"]])

    assert in_child(body) == [True, "RuntimeError"]


@needs_landlock
def test_non_root_uses_a_user_namespace():
    if os.geteuid() != 0:
        pytest.skip("the test becomes nobody, which needs root")
    base = Path(tempfile.mkdtemp(prefix="kbv3-sandbox-nobody-"))  # pytest's tmp_path is 0700
    scratch, other = base / "scratch", base / "other"  # both writable by nobody without Landlock
    for d in (scratch, other):
        d.mkdir()
        d.chmod(0o777)
    base.chmod(0o755)

    def body():
        os.setgroups([])
        os.setresgid(65534, 65534, 65534)
        os.setresuid(65534, 65534, 65534)  # this also makes the process non-dumpable
        report = sandbox.enter_sandbox([scratch])
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            udp = attempt(s.sendto, b"x", ("10.0.0.1", 53))
        return report.to_dict(), attempt(_write, scratch / "x"), attempt(_write, other / "x"), udp

    try:
        report, inside, outside, udp = in_child(body)
    finally:
        shutil.rmtree(base)
    if "unshare failed" in " ".join(report["notes"]):
        pytest.skip(f"unprivileged user namespaces are off here: {report['notes']}")
    assert report["kind"] == "landlock" and report["network"] == "netns" and report["notes"] == [], report
    assert report["caps_dropped"]  # those of the user namespace it made
    assert (inside, outside, udp) == ("ok", "PermissionError:EACCES", "OSError:ENETUNREACH")
