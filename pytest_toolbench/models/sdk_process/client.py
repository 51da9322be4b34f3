"""The pytest side of the shared SDK process (server.py says why it exists).

:class:`~pytest_toolbench.models.sdk_process.launcher.SdkProcess` is the process itself (re-exported
here): started by the controller as early as it can guess a run wants one, and handed to xdist
workers by socket path.
:class:`RemoteBackend` is the :class:`~pytest_toolbench.models.base.ChatModel` a pytest process
uses instead of calling the SDK itself: it wraps the in-process backend it replaces, for identity
(name, ``describe()``, hence cache keys) and for its :class:`~pytest_toolbench.models.spec.BackendSpec`,
which the SDK process builds the same backend from, and sends each call to the process.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
from pathlib import Path
from typing import Any

from pytest_toolbench.models.base import CallContext, ChatRequest, ChatResponse, ModelCallError
from pytest_toolbench.models.call_log import current_call_log
from pytest_toolbench.models.meter import REQUEST_METER
from pytest_toolbench.models.openai_backend import OpenAIBackend
from pytest_toolbench.models.reachability import EndpointUnreachable
from pytest_toolbench.models.sdk_process.launcher import SdkProcess as SdkProcess  # re-exported
from pytest_toolbench.models.sdk_process.protocol import (
    FrameLink,
    Hello,
    SdkLink,
    decode_error,
    frame,
    sdk_environment,
)
from pytest_toolbench.models.liveness import process_alive

#: How long a pytest process waits for the SDK process to listen (a busy machine starts it slowly).
START_TIMEOUT_S = 60.0


class RemoteBackend:
    """``ChatModel`` whose calls run in the shared SDK process."""

    #: The SDK process's backend holds the requests of the processes it serves to
    #: ``--concurrency`` each (models/sdk_process/server.py; models/base.py).
    LIMITS_REQUESTS = True

    def __init__(self, local: OpenAIBackend, link: SdkLink, *, server_pid: int | None = None):
        #: The in-process backend this stands for: name, describe() and the spec sent over.
        self.local = local
        self.name = local.name
        self.link = link
        self.address = link.address
        self.server_pid = server_pid
        self._ids = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connecting: asyncio.Future[None] | None = None
        #: The connection once the SDK process said ready (None before, and after aclose()).
        self._link: FrameLink | None = None
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._gone: str | None = None
        #: The endpoint's unreachable verdict once the SDK process gave it (models/reachability.py):
        #: later calls fail here at once, without a round trip.
        self._unreachable: EndpointUnreachable | None = None

    # -- ChatModel -------------------------------------------------------------------------------
    async def complete(self, request: ChatRequest, ctx: CallContext) -> ChatResponse:
        self.local.raise_if_aborted()  # a dead managed server: fail now, as in process
        if self._unreachable is not None:
            verdict = self._unreachable
            raise EndpointUnreachable(verdict.kind, verdict.message, attempts=0, hint=verdict.hint)
        link = self._link if self._loop is asyncio.get_running_loop() else None
        if link is None or self._gone is not None:
            link = await self._connected()
        call_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        link.send({
            "op": "complete", "id": call_id,
            "request": request.model_dump(mode="json", exclude_unset=True),
            "ctx": {"case_id": ctx.case_id, "turn": ctx.turn, "benchmark": ctx.benchmark},
        })
        try:
            with REQUEST_METER.request():  # the live progress line (models/meter.py)
                reply = await future
        except asyncio.CancelledError:
            self._pending.pop(call_id, None)
            if self._link is not None:
                self._link.send({"op": "cancel", "id": call_id})
            raise
        log = current_call_log()
        if log is not None:
            log.add_wire_events(reply.get("log"))
        if "error" in reply:
            error = decode_error(reply["error"])
            if isinstance(error, EndpointUnreachable):
                self._unreachable = error
            raise error
        response = ChatResponse.model_validate(reply["response"])
        REQUEST_METER.add_usage(response.usage)
        return response

    def connect_soon(self, loop: asyncio.AbstractEventLoop) -> None:
        """Connect and say hello now, before this process builds its first requests; ``loop``
        (not running yet) takes the connection over when it runs. Why: a call connected only
        once every case queued in the same pass had built its request, and the SDK process
        built its client only when the calls came in. Greeted first, it builds the client
        (server.py) while the cases are built. The socket is connected and the hello written
        here, synchronously: a task would run after the cases' first steps. When the SDK
        process is not listening yet, the first call connects as before; a failure is raised
        by the first call, as when the call itself connected."""
        if self._loop is loop or self._gone is not None:
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.address.socket)
            sock.sendall(frame(self._hello().to_wire()))
            sock.setblocking(False)
        except OSError:  # not listening yet (or gone): the first call connects and says why
            sock.close()
            return
        unclaimed = [sock]  # _connect takes it; a task cancelled before it ran never does

        def settle(task: asyncio.Task[None]) -> None:
            # Retrieved here too: a run that never calls (answered from the cache) must not log it.
            if not task.cancelled():
                task.exception()
            for left in unclaimed:
                left.close()

        self._start_connecting(loop, unclaimed).add_done_callback(settle)

    async def aclose(self) -> None:
        link, self._link, self._loop, self._connecting = self._link, None, None, None
        if link is not None:
            link.close()

    def describe(self) -> dict[str, Any]:
        return self.local.describe()

    # -- the connection --------------------------------------------------------------------------
    async def _connected(self) -> FrameLink:
        loop = asyncio.get_running_loop()
        if self._gone is not None:
            raise ModelCallError("sdk_process_gone", self._gone)
        if self._loop is not loop:  # first call, or a new event loop (tests): a new connection
            self._start_connecting(loop)
        assert self._connecting is not None
        await asyncio.shield(self._connecting)
        if self._gone is not None:  # lost while this call waited for the connection
            raise ModelCallError("sdk_process_gone", self._gone)
        assert self._link is not None
        return self._link

    def _start_connecting(self, loop: asyncio.AbstractEventLoop,
                          greeted: list[socket.socket] | None = None) -> asyncio.Task[None]:
        """A new connection in ``loop``: every call of this loop awaits its task."""
        self._loop, self._link, self._pending = loop, None, {}
        self._connecting = loop.create_task(self._connect(greeted))
        return self._connecting

    def _hello(self) -> Hello:
        return Hello(backend=self.local.spec, processes=self.link.processes,
                     server_pid=self.server_pid, env=sdk_environment())

    async def _connect(self, greeted: list[socket.socket] | None = None) -> None:
        """Connect and wait for the SDK process's greeting. ``greeted``: a socket connected and
        greeted already (:meth:`connect_soon`), taken out of the list here."""
        sock = greeted.pop() if greeted else None
        deadline = time.monotonic() + START_TIMEOUT_S
        pid = self.address.pid
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[dict[str, Any]] = loop.create_future()

        def on_message(message: dict[str, Any]) -> None:
            if not ready.done():
                ready.set_result(message)  # the greeting
            else:
                self._on_reply(message)

        def on_lost(exc: Exception | None) -> None:
            if not ready.done():  # before its greeting: the hello was refused, or it died
                ready.set_exception(ModelCallError("sdk_process_gone", self._lost_message(exc)))
            self._on_lost(link, exc)

        link = FrameLink(on_message, on_lost)
        if sock is not None:
            try:
                await loop.create_unix_connection(lambda: link, sock=sock)
            except BaseException:
                sock.close()
                raise
        else:
            while True:
                try:
                    await loop.create_unix_connection(lambda: link, self.address.socket)
                    break
                except (FileNotFoundError, ConnectionRefusedError):
                    if not process_alive(pid) or time.monotonic() > deadline:
                        self._gone = f"the SDK process (pid {pid}) did not start: {self._log_tail()}"
                        raise ModelCallError("sdk_process_gone", self._gone) from None
                    await asyncio.sleep(0.01)
            link.send(self._hello().to_wire())
        try:
            greeting = await ready
        except BaseException:  # cancelled (the run ends) or lost: the connection goes too
            link.close()
            raise
        if greeting.get("op") != "ready":
            link.close()
            raise ModelCallError("sdk_process_gone", f"unexpected greeting {greeting!r}")
        self._link = link

    def _on_reply(self, reply: dict[str, Any]) -> None:
        future = self._pending.pop(reply.get("id"), None)  # type: ignore[arg-type]
        if future is not None and not future.done():
            future.set_result(reply)

    def _on_lost(self, link: FrameLink, exc: Exception | None) -> None:
        if self._link is not link:
            return  # closed by aclose(), or a connection this backend no longer uses
        self._gone = self._lost_message(exc)
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ModelCallError("sdk_process_gone", self._gone))
        self._pending.clear()

    def _lost_message(self, exc: Exception | None) -> str:
        # A clean end of stream is named as the stream reader named it (IncompleteReadError).
        why = type(exc).__name__ if exc is not None else "IncompleteReadError"
        return (f"the SDK process (pid {self.address.pid}) closed the connection ({why}): "
                f"{self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            text = Path(self.address.log).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "no log"
        return text.strip()[-1500:] or "its log is empty"
