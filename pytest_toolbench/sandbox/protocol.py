"""Wire format between the pool and its workers: length-prefixed JSON over dedicated pipe fds.

Dedicated fds (not stdin/stdout) so that anything the untrusted code prints can never be mistaken
for a reply. Stdlib only: the worker imports this before anything else.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import struct
import time
from typing import Any

# Bound at import, before any untrusted code runs: a tool that replaces ``json.dumps`` in its
# own child cannot corrupt that child's reply.
_dumps, _loads = json.dumps, json.loads
_CUT = re.compile(r"…\[truncated \d+ chars\]")
_HEADER = struct.Struct(">I")
HEADER_BYTES = _HEADER.size
#: Largest message accepted either way; a bigger reply means a broken or hostile worker.
MAX_MESSAGE_BYTES = 128 * 1024 * 1024


class ChannelClosed(EOFError):
    """The other end closed the pipe (the worker died or the pool went away)."""


class ProtocolError(RuntimeError):
    """The bytes on the pipe are not a well-formed message."""


def encode(obj: Any) -> bytes:
    data = _dumps(obj, ensure_ascii=False, allow_nan=True).encode("utf-8")
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


def decode_frame(data: bytes) -> Any:
    """One whole message (header + body) held in memory, e.g. read from a child until EOF."""
    if len(data) < _HEADER.size:
        raise ProtocolError("no message")
    (size,) = _HEADER.unpack(data[: _HEADER.size])
    if size != len(data) - _HEADER.size:
        raise ProtocolError(f"announced {size} bytes, got {len(data) - _HEADER.size}")
    return _parse(data[_HEADER.size :])


def recv(fd: int, deadline: float | None = None) -> Any:
    """Read one message; ``deadline`` is a time.monotonic() value (None: block)."""
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    if size > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"announced message of {size} bytes exceeds {MAX_MESSAGE_BYTES}")
    return _parse(_read_exact(fd, size, deadline))


def _parse(body: bytes) -> Any:
    """A message body, or ProtocolError. Nesting too deep for the JSON decoder (RecursionError,
    e.g. a hand-written frame from a hostile call) is a bad frame too, not the reader's death."""
    try:
        return _loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ProtocolError(f"malformed message: {reason}") from exc


# ------------------------------------------------------------------------------------- caps


def cap_text(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the cut marked so nobody mistakes it for the whole."""
    if limit <= 0 or len(text) <= limit or _CUT.fullmatch(text, limit):  # already cut: idempotent
        return text
    return text[:limit] + f"…[truncated {len(text) - limit} chars]"


def cap_strings(obj: Any, limit: int) -> Any:
    """Every string inside a JSON-able value capped (dict keys too: they are text a tool chose)."""
    if isinstance(obj, str):
        return cap_text(obj, limit)
    if isinstance(obj, list):
        return [cap_strings(v, limit) for v in obj]
    if isinstance(obj, dict):
        return {cap_text(str(k), limit): cap_strings(v, limit) for k, v in obj.items()}
    return obj


def exit_text(status: int | None) -> str:
    """A process's end in words; ``status`` as Popen.returncode (negative: killed by a signal)."""
    if status is None:
        return "still running"
    if status < 0:
        sig = -status
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        why = {
            "SIGXCPU": "CPU-time limit exceeded",
            "SIGKILL": "killed",
            "SIGSEGV": "segmentation fault",
            "SIGXFSZ": "file-size limit exceeded",
            "SIGSYS": "forbidden system call",
            "SIGABRT": "aborted",
        }.get(name, "terminated by signal")
        return f"{why} ({name})"
    return f"exited with status {status}"
