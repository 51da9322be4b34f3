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


def json_bytes(obj: Any) -> bytes:
    """``obj`` as UTF-8 JSON. A lone surrogate (a tool returning ``chr(0xd800)``, or a JSON
    ``\\ud800`` escape its arguments held) has no UTF-8 form: such a value goes as ASCII
    JSON, the surrogate as an escape that reads back to the same string."""
    try:
        return _dumps(obj, ensure_ascii=False, allow_nan=True).encode("utf-8")
    except UnicodeEncodeError:
        return _dumps(obj, ensure_ascii=True, allow_nan=True).encode("ascii")


def encode(obj: Any) -> bytes:
    data = json_bytes(obj)
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


# ------------------------------------------------------------------------- split messages
# A call travels as a small header the zygote reads (id, job, timeout; or status, detail) and an
# opaque body it never parses: the payload on the way in, the child's reply on the way out.
_SPLIT = struct.Struct(">II")
SPLIT_BYTES = _SPLIT.size
#: Largest header either way (they hold ids, job names, statuses and exit texts only).
MAX_HEADER_BYTES = 64 * 1024


def split_prefix(header: bytes, body_len: int) -> bytes:
    return _SPLIT.pack(len(header), body_len) + header


def unpack_split(prefix: bytes | bytearray | memoryview) -> tuple[int, int]:
    header_len, body_len = _SPLIT.unpack(prefix)
    if header_len > MAX_HEADER_BYTES:
        raise ProtocolError(f"header of {header_len} bytes exceeds {MAX_HEADER_BYTES}")
    return header_len, body_len


def send_split(fd: int, header: dict[str, Any], body: bytes) -> None:
    head = _dumps(header).encode("utf-8")
    write_all(fd, split_prefix(head, len(body)) + body)


def recv_split(fd: int, deadline: float | None = None, max_body: int = MAX_MESSAGE_BYTES) -> tuple[dict[str, Any], bytes]:
    """(header, opaque body) of one split message."""
    header_len, body_len = unpack_split(_read_exact(fd, SPLIT_BYTES, deadline))
    if body_len > max_body:
        raise ProtocolError(f"announced body of {body_len} bytes exceeds {max_body}")
    header = _parse(_read_exact(fd, header_len, deadline))
    if not isinstance(header, dict):
        raise ProtocolError("header is not an object")
    return header, _read_exact(fd, body_len, deadline)


def reply_limit(cap: int) -> int:
    """Largest reply a call's child may send, in bytes: its text capped at ``cap`` characters is
    at most 6 bytes a character once JSON-escaped, in a few fields; anything bigger is a flood."""
    return 32 * cap + 64 * 1024 if cap > 0 else 8 * 1024 * 1024


# ------------------------------------------------------------------------------------- caps
_ITEMS_CUT = re.compile(r"…\[truncated \d+ (?:items|keys)\]")
#: Nesting a reply value may have once parsed (the JSON decoder's own limit is the recursion limit).
MAX_VALUE_DEPTH = 100


def cap_total(value: Any, limit: int) -> Any:
    """A JSON-able value whose text (strings, dict keys, numbers) adds up to at most ``limit``
    characters in all, not per string: a list of a million short strings is cut as one long text
    is. Cuts are marked (``…[truncated N chars]`` in a string, a ``…[truncated N items]`` string
    ending a list, a ``"…": "…[truncated N keys]"`` entry ending a dict); idempotent. Raises
    ValueError on nesting deeper than MAX_VALUE_DEPTH or a non-JSON type."""
    if limit <= 0:
        return value
    budget = [limit]

    def text(s: str) -> str:
        kept = cap_text(s, budget[0]) if budget[0] > 0 else cap_text(s, 1)
        budget[0] -= min(len(s), max(budget[0], 1))
        return kept

    def walk(v: Any, depth: int) -> Any:
        if depth > MAX_VALUE_DEPTH:
            raise ValueError(f"value nested more than {MAX_VALUE_DEPTH} levels deep")
        if isinstance(v, str):
            return v if _ITEMS_CUT.fullmatch(v) else text(v)
        if v is None or isinstance(v, bool):
            budget[0] -= 4
            return v
        if isinstance(v, (int, float)):
            budget[0] -= 8
            return v
        if isinstance(v, list):
            out = []
            for i, item in enumerate(v):
                if budget[0] <= 0 and not (isinstance(item, str) and _ITEMS_CUT.fullmatch(item)):
                    out.append(f"…[truncated {len(v) - i} items]")
                    break
                out.append(walk(item, depth + 1))
            return out
        if isinstance(v, dict):
            got: dict[str, Any] = {}
            for i, (k, item) in enumerate(v.items()):
                if budget[0] <= 0 and k != "…":
                    got["…"] = f"…[truncated {len(v) - i} keys]"
                    break
                got[text(str(k)) if k != "…" else k] = walk(item, depth + 1)
            return got
        raise ValueError(f"not a JSON value: {type(v).__name__}")

    return walk(value, 0)


def parse_body(body: bytes) -> Any:
    """An untrusted reply body: UTF-8 JSON, nesting bounded by the decoder (ProtocolError)."""
    return _parse(body)


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
