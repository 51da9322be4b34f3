"""Wire format between the pool and its workers: length-prefixed JSON over dedicated pipe fds.

Dedicated fds (not stdin/stdout) so that anything the untrusted code prints can never be mistaken
for a reply. Stdlib only: the worker imports this before anything else.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

_HEADER = struct.Struct(">I")
#: Largest message accepted either way; a bigger reply means a broken or hostile worker.
MAX_MESSAGE_BYTES = 128 * 1024 * 1024


class ChannelClosed(EOFError):
    """The other end closed the pipe (the worker died or the pool went away)."""


class ProtocolError(RuntimeError):
    """The bytes on the pipe are not a well-formed message."""


def encode(obj: Any) -> bytes:
    data = json.dumps(obj, ensure_ascii=False, allow_nan=True).encode("utf-8")
    if len(data) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {len(data)} bytes exceeds {MAX_MESSAGE_BYTES}")
    return _HEADER.pack(len(data)) + data


def send(fd: int, obj: Any) -> None:
    write_all(fd, encode(obj))


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    remaining = n
    while remaining:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                raise TimeoutError
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise ChannelClosed("pipe closed")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def recv(fd: int, deadline: float | None = None) -> Any:
    """Read one message; ``deadline`` is a time.monotonic() value (None: block)."""
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    if size > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"announced message of {size} bytes exceeds {MAX_MESSAGE_BYTES}")
    try:
        return json.loads(_read_exact(fd, size, deadline).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"malformed message: {exc}") from exc
