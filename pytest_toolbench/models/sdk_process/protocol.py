"""The wire between pytest processes and the shared SDK process: framed JSON over a Unix socket.

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON. One connection per
backend per pytest process, multiplexed by request ``id``. Messages:

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
from typing import Any, Literal

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


def frame(message: dict[str, Any]) -> bytes:
    data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return _HEADER.pack(len(data)) + data


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any]:
    """The next message; ``asyncio.IncompleteReadError`` when the peer has gone."""
    (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes")
    return json.loads(await reader.readexactly(size))


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
