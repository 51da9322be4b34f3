"""The wire between pytest processes and the shared SDK process: framed JSON over a Unix socket.

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON. One connection per
backend per pytest process, multiplexed by request ``id``; both ends run it through
:class:`FrameLink` (an asyncio protocol: every frame of a chunk read is handled at once, and the
frames sent within one turn of the event loop leave in one write). Messages:

* client -> server: :class:`Hello` once (the backend's :class:`~pytest_toolbench.models.spec.BackendSpec`,
  how many pytest processes share it, the managed server's pid, ``sdk_environment()``), then ``{"op": "complete", "id", "request", "ctx"}`` and
  ``{"op": "cancel", "id"}``;
* server -> client: ``{"op": "ready"}`` after hello, then per call ``{"id", "response"}`` or
  ``{"id", "error"}``, both with ``"log"``: the call's ``CaseCallLog.wire_events()`` (retries,
  lost turns, endpoint attempts), which the client adds to the case's own call log.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import struct
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field

from pytest_toolbench.models.base import ContextLengthExceeded, LostTurn, ModelCallError
from pytest_toolbench.models.reachability import EndpointUnreachable
from pytest_toolbench.models.sdk_process.launcher import LOG_NAME
from pytest_toolbench.models.spec import BackendSpec

_HEADER = struct.Struct(">I")


class SdkAddress(BaseModel):
    """Where the run's SDK process listens (``SdkProcess.address()``; xdist workers get it as JSON)."""

    model_config = ConfigDict(frozen=True)

    socket: str
    pid: int
    log: str


class SdkLink(BaseModel):
    """How one pytest process uses the run's SDK process: its address, and how many pytest
    processes share it (the shared backend's request limit is ``--concurrency`` times that)."""

    model_config = ConfigDict(frozen=True)

    address: SdkAddress
    processes: int = Field(1, ge=1)


class Hello(BaseModel):
    """A connection's first message: which backend it calls (one connection per backend)."""

    op: Literal["hello"] = "hello"
    backend: BackendSpec
    processes: int = 1
    server_pid: int | None = None
    env: dict[str, str] | None = None

    def to_wire(self) -> dict[str, Any]:
        """As JSON, the backend's key included (the SDK process needs it)."""
        return {**self.model_dump(mode="json", exclude={"backend"}), "backend": self.backend.to_wire()}
#: A frame larger than this is a broken peer, not a reply (a chat reply is kilobytes).
MAX_FRAME = 256 * 1024 * 1024
#: Frames queued in one turn that leave at once rather than at the turn's end: a run's first
#: turn queues a request per case it starts (320 at 256 in flight), and the SDK process, idle
#: until they came, then built them all before its first connection opened; sent in batches,
#: its work overlaps the pytest process's.
FLUSH_AT_FRAMES = 16


#: Environment variables the SDK and its HTTP stacks read when a client is built or a request is
#: sent: the SDK's own (``OPENAI_ORG_ID``, ``OPENAI_PROJECT_ID``...), proxies, CA bundles, netrc.
_SDK_ENVIRONMENT = re.compile(
    r"OPENAI_\w*|\w*_PROXY|SSL_CERT_FILE|SSL_CERT_DIR|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|NETRC", re.I)


def sdk_environment(environ: Any = None) -> dict[str, str]:
    """The variables of ``environ`` (default: this process's) that the SDK's behaviour depends on.

    Why they travel in the hello: the SDK process starts before pytest has read the ini file or
    the conftests, so a variable that a ``conftest.py`` (``load_dotenv()``) or pytest-env sets
    would otherwise never reach it; an in-process SDK would see it."""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items() if _SDK_ENVIRONMENT.fullmatch(k)}


def adopt_sdk_environment(env: dict[str, str]) -> None:
    """Make this process's SDK variables exactly ``env`` (the SDK process, at each hello)."""
    for key in [k for k in os.environ if _SDK_ENVIRONMENT.fullmatch(k) and k not in env]:
        del os.environ[key]
    os.environ.update(env)


#: One encoder for every frame (``json.dumps`` with options builds a new one per call).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def frame(message: dict[str, Any]) -> bytes:
    # surrogatepass: a lone surrogate still in a message (an error quoting a reply, see
    # utf8_safe.py) crosses as it is; ``json.loads`` decodes bytes with the same handler.
    data = _ENCODER.encode(message).encode("utf-8", "surrogatepass")
    return _HEADER.pack(len(data)) + data


class FrameLink(asyncio.Protocol):
    """One end of a connection: frames in, frames out.

    Why a protocol rather than asyncio streams: with a ``StreamReader`` each message cost two
    awaited ``readexactly`` calls, and each ``StreamWriter.write`` a send of its own. Here a chunk
    read from the socket is cut into every complete frame it holds, each handed to ``on_message``
    in turn, and :meth:`send` queues a frame and writes everything queued once the current turn
    of the event loop is over: a burst of replies (or of requests) leaves in one write.

    ``on_message(message)`` gets each decoded message; ``on_lost(exc)`` is called once when the
    connection ends: ``None`` for a clean end of stream, else why (the peer's reset, a frame over
    :data:`MAX_FRAME` or not JSON, which closes the connection: a broken peer is not read on).
    """

    def __init__(self, on_message: Callable[[dict[str, Any]], None],
                 on_lost: Callable[[Exception | None], None]) -> None:
        self.on_message = on_message
        self.on_lost = on_lost
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._queued: list[bytes] = []
        self._flush_handle: asyncio.Handle | None = None
        self._lost = False

    # -- asyncio.Protocol ------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        start, end = 0, len(buffer)
        while end - start >= _HEADER.size and not self._lost:
            (size,) = _HEADER.unpack_from(buffer, start)
            stop = start + _HEADER.size + size
            if size > MAX_FRAME:  # a broken peer: nothing after it can be read
                self._fail(ValueError(f"frame of {size} bytes"))
                return
            if stop > end:
                break
            try:
                message = json.loads(buffer[start + _HEADER.size:stop])
            except ValueError as exc:  # not JSON (nor UTF-8): the same
                self._fail(exc)
                return
            start = stop
            # A handler's own error is not the wire's: asyncio logs it (to the SDK process's log,
            # which the client quotes) and closes the connection.
            self.on_message(message)
        del buffer[:start]

    def eof_received(self) -> bool | None:
        return None  # close our side too: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc)

    # -- sending ---------------------------------------------------------------------------------
    def send(self, message: dict[str, Any]) -> None:
        """Queue ``message``; it leaves with the others queued in this turn of the event loop,
        or at once with them when :data:`FLUSH_AT_FRAMES` are queued. Dropped when the
        connection has ended (nobody would read it)."""
        if self._lost:
            return
        self._queued.append(frame(message))
        if len(self._queued) >= FLUSH_AT_FRAMES:
            if self._flush_handle is not None:
                self._flush_handle.cancel()
            self.flush()
        elif self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Write what is queued now."""
        self._flush_handle = None
        queued, self._queued = self._queued, []
        if queued and self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"".join(queued))

    def close(self) -> None:
        """Write what is queued, then close (connection_lost follows)."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
        self.flush()
        if self.transport is not None:
            self.transport.close()

    def is_closing(self) -> bool:
        return self._lost or self.transport is None or self.transport.is_closing()

    def _fail(self, exc: Exception | None) -> None:
        if self._lost:
            return
        self._lost = True
        self._queued.clear()
        if self.transport is not None:
            self.transport.close()
        self.on_lost(exc)


# ----------------------------------------------------------------------------- errors
def encode_error(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, ModelCallError):
        return {"type": _error_type(exc), "kind": exc.kind, "message": exc.message,
                "attempts": exc.attempts, "hint": exc.hint}
    return {"type": "ModelCallError", "kind": "sdk_process_error",
            "message": f"{type(exc).__name__}: {exc}"}


def _error_type(exc: ModelCallError) -> str:
    for cls in (ContextLengthExceeded, LostTurn, EndpointUnreachable):
        if isinstance(exc, cls):
            return cls.__name__
    return "ModelCallError"


def decode_error(error: dict[str, Any]) -> ModelCallError:
    """The same exception class the in-process backend raises (runners tell them apart)."""
    kind, message = str(error.get("kind", "sdk_process_error")), str(error.get("message", ""))
    if error.get("type") == "ContextLengthExceeded":
        return ContextLengthExceeded(message)
    if error.get("type") == "LostTurn":
        return LostTurn(kind, message)
    if error.get("type") == "EndpointUnreachable":
        return EndpointUnreachable(kind, message, attempts=error.get("attempts"),
                                   hint=error.get("hint"))
    return ModelCallError(kind, message, attempts=error.get("attempts"), hint=error.get("hint"))
