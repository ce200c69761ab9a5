"""The socket `kbv3 serve` listens on: a Unix socket only its owner can reach, never a port.

Owns checking the socket's path before binding (its folder created 0700 when missing, an
existing folder the user's and writable by nobody else unless sticky; a live server at the path
refused, a stale socket file removed, anything else refused), binding it 0600 from the start,
and telling whether a client hung up.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
from pathlib import Path

from .protocol import MAX_SOCKET_PATH


class ServeError(Exception):
    """The service cannot start: the socket path is unusable or already served."""


def prepare_socket_path(path: str | os.PathLike) -> Path:
    """The absolute socket path, after checking its folder (created 0700 when missing; an
    existing one must be the user's or root's and writable by nobody else unless sticky, like
    /tmp) and what is already at the path: a live server there is refused, a stale socket file
    (its server gone) is removed, anything that is not a socket is refused."""
    path = Path(path).expanduser().absolute()
    if len(os.fsencode(str(path))) > MAX_SOCKET_PATH:
        raise ServeError(f"socket path {path} is longer than {MAX_SOCKET_PATH} bytes; choose a shorter one")
    parent = path.parent
    if not parent.exists():
        parent.mkdir(mode=0o700, parents=True)
        os.chmod(parent, 0o700)
    info = parent.stat()
    if not stat.S_ISDIR(info.st_mode):
        raise ServeError(f"{parent} is not a folder")
    if info.st_uid not in (os.getuid(), 0):
        raise ServeError(f"{parent} belongs to another user (uid {info.st_uid}); put the socket in a folder of yours")
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        raise ServeError(
            f"{parent} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}); "
            "put the socket in a folder only you can write (it is created 0700 when missing)"
        )
    try:
        existing = path.lstat()
    except FileNotFoundError:
        return path
    if not stat.S_ISSOCK(existing.st_mode):
        raise ServeError(f"{path} exists and is not a socket; choose another path (nothing was removed)")
    if existing.st_uid != os.getuid():
        raise ServeError(f"{path} is a socket of another user (uid {existing.st_uid}); choose another path")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        path.unlink(missing_ok=True)  # stale: its server is gone
        return path
    except OSError as exc:
        if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT):
            raise ServeError(f"cannot tell whether {path} is served: {exc}") from None
        path.unlink(missing_ok=True)
        return path
    finally:
        probe.close()
    raise ServeError(f"a server is already listening on {path}; stop it (Evaluator(path).shutdown()) or choose another")


def bind_owner_only(path: Path) -> tuple[socket.socket, int]:
    """A listening Unix socket at `path`, mode 0600 from the start; and its inode."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the socket file is born 0600: no window where others could connect
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(64)
    return sock, path.lstat().st_ino


def hung_up(sock: socket.socket) -> bool:
    """Whether the client closed its end (a request is answered only on an open connection)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
