"""Length-prefixed JSON frames over a stream socket, bounded in size, each receive under a
deadline of the receiver's own clock; JSON parsing runs no code. Needs no torch: the supervisor
and a solution process speak it (`channel`), and so do `kbv3 serve` and its clients.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from typing import Any

MAX_FRAME_BYTES = 16 << 20  # a message larger than this is a protocol violation
_HEADER = struct.Struct("!I")


class ProtocolError(Exception):
    """The other side broke the protocol: a malformed, oversized or unexpected message."""


class PeerGone(Exception):
    """The other side closed the connection (it exited or was killed)."""


class Deadline(Exception):
    """No complete message arrived before the deadline."""


class Link:
    """JSON messages over a connected stream socket, each at most `MAX_FRAME_BYTES`."""

    allow_nan = True  # NaN and Infinity in a frame (Python's JSON reads them; strict readers do not)

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buffer = bytearray()

    def send(self, message: dict[str, Any]) -> None:
        blob = json.dumps(message, allow_nan=self.allow_nan, separators=(",", ":")).encode()
        if len(blob) > MAX_FRAME_BYTES:
            raise ProtocolError(f"message of {len(blob)} bytes exceeds {MAX_FRAME_BYTES}")
        try:
            self.sock.sendall(_HEADER.pack(len(blob)) + blob)
        except OSError as exc:  # a broken pipe, a reset connection, a closed socket
            raise PeerGone(str(exc)) from None

    def receive(self, timeout_s: float | None = None) -> dict[str, Any]:
        """The next message; `Deadline` after `timeout_s` seconds of this process's clock (a
        message that was only partly there stays buffered for the next call)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        self._fill(_HEADER.size, deadline)
        (length,) = _HEADER.unpack(bytes(self._buffer[: _HEADER.size]))
        if length > MAX_FRAME_BYTES:
            raise ProtocolError(f"announced message of {length} bytes exceeds {MAX_FRAME_BYTES}")
        self._fill(_HEADER.size + length, deadline)
        blob = bytes(self._buffer[_HEADER.size : _HEADER.size + length])
        del self._buffer[: _HEADER.size + length]
        try:
            message = json.loads(blob)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise ProtocolError(f"message is not JSON (or nested too deep): {type(exc).__name__}") from None
        if not isinstance(message, dict) or not isinstance(message.get("kind"), str):
            raise ProtocolError(f"message without a kind: {str(message)[:200]}")
        return message

    def _fill(self, n: int, deadline: float | None) -> None:
        while len(self._buffer) < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Deadline(f"no message within the time limit ({len(self._buffer)} of {n} bytes)")
                self.sock.settimeout(left)
            else:
                self.sock.settimeout(None)
            try:
                chunk = self.sock.recv(max(65536, n - len(self._buffer)))
            except TimeoutError:
                continue
            except (ConnectionResetError, OSError) as exc:
                raise PeerGone(str(exc)) from None
            if not chunk:
                raise PeerGone("the other side closed the channel")
            self._buffer += chunk

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
