"""The shared SDK process: the run's openai SDK clients, for every pytest process of the run.

Why a process of its own: the SDK costs CPU on every request and is slow to import. In the
pytest process both share one GIL with pytest's own per-test work, which makes a run CPU-bound at
a few hundred requests in flight on a small machine, and the import sits on every process's
start-up (each xdist worker pays it again). Here the import overlaps collection, the SDK's CPU
runs on another core, and one :class:`~pytest_toolbench.models.openai_backend.OpenAIBackend` per
model serves all workers, so its endpoint pool routes the whole run's requests, least-loaded
(perf/run.py measures both placements).

Nothing about a call changes: this process runs the very backend the pytest process would (same
retries, error kinds, lost turns, endpoint health, and the pytest process's SDK environment, which
comes with its hello); the client (client.py) re-raises its errors
and adds its per-call log to the case's. It stops when its parent closes stdin (or dies).

Run by launcher.py (``SdkProcess``): ``python -m pytest_toolbench.models.sdk_process.server SOCKET``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import importlib
import os
import signal
import sys
from typing import Any

from pytest_toolbench.models.base import CallContext, ChatRequest
from pytest_toolbench.owned_folders import LOCK_NAME
from pytest_toolbench.models.call_log import CURRENT_CALL_LOG, CaseCallLog
from pytest_toolbench.models.sdk_process.launcher import IMPORT_ON_FIRST_CALL
from pytest_toolbench.models.openai_backend import OpenAIBackend
from pytest_toolbench.models.sdk_process.protocol import (
    LOG_NAME,
    FrameLink,
    Hello,
    adopt_sdk_environment,
    encode_error,
)
from pytest_toolbench.models.liveness import dead_server_check


class SdkServer:
    def __init__(self) -> None:
        #: One backend per distinct spec, shared by every connection that asks for it.
        self.backends: dict[str, OpenAIBackend] = {}

    def backend_for(self, hello: Hello) -> OpenAIBackend:
        # Each pytest process keeps --concurrency cases in flight: the shared backend's request
        # limit is that times the number of processes it serves.
        spec = hello.backend.model_copy(update={
            "concurrency": max(1, hello.backend.concurrency) * max(1, hello.processes)})
        # The SDK reads these when it builds a client and sends a request: the pytest process's,
        # as an in-process SDK would (protocol.sdk_environment says why). The processes of one
        # run share them; a backend is per environment all the same.
        if hello.env is not None:
            adopt_sdk_environment(hello.env)
        key = json.dumps([spec.to_wire(), hello.server_pid, hello.env], sort_keys=True)
        backend = self.backends.get(key)
        if backend is None:
            pid = hello.server_pid
            backend = OpenAIBackend(spec, abort_check=dead_server_check(pid))
            self.backends[key] = backend
        return backend

    def connection(self) -> FrameLink:
        """A new connection's protocol (the listener's factory)."""
        return _Connection(self).link

    async def complete(self, backend: OpenAIBackend, message: dict[str, Any], link: FrameLink) -> None:
        log = CaseCallLog()
        CURRENT_CALL_LOG.set(log)  # this task's own log: the backend appends retries etc. to it
        reply: dict[str, Any] = {"id": message["id"]}
        try:
            request = ChatRequest.model_validate(message["request"])
            ctx = CallContext(**message["ctx"])
            response = await backend.complete(request, ctx)
            reply["response"] = response.model_dump(mode="json")
        except asyncio.CancelledError:
            return  # the case was cancelled (--case-timeout, Ctrl-C): nobody waits for a reply
        except Exception as exc:  # every failure goes back to the case that made the call
            reply["error"] = encode_error(exc)
        reply["log"] = log.wire_events()
        try:
            link.send(reply)  # dropped if the pytest process has gone
        except Exception as exc:  # a reply that cannot be framed must still end the call
            link.send({"id": message["id"], "error": encode_error(exc), "log": []})


#: Calls started per turn of the event loop. A burst of calls (a run's first turn sends one per
#: case it starts, 320 at 256 in flight) made a task each at once, and asyncio ran every one's
#: request building (~1 ms of the SDK's CPU) before any task went on to its connection: no
#: request left until the whole burst was built (at 256 in flight, 0.38 s after the first call
#: came in), and the replies came back in one burst too, round after round. Started a few a turn,
#: the first calls' connections and requests proceed between the later ones' building.
#: perf/run.py's endpoint at 0.5 s, 4,000 cases at 256 in flight, five pairs against starting
#: all at once: wall 10.95-12.17 s against 11.40-12.92 s, each freed place taken 24-49 ms after
#: its reply against 51-82 ms; at 64 in flight no different. One a turn was no faster and
#: cost more CPU (more turns on both sides of the connection, replies batched less).
STARTS_PER_TURN = 4


class _Connection:
    """One pytest process's connection: its hello first, then its calls, each in a task of its own
    (cancelled when it asks, or when the connection ends: finished, or interrupted), started at
    most :data:`STARTS_PER_TURN` a turn, in the order they came."""

    def __init__(self, server: SdkServer) -> None:
        self.server = server
        self.link = FrameLink(self.on_message, self.on_lost)
        self.backend: OpenAIBackend | None = None
        self.tasks: dict[int, asyncio.Task[None]] = {}
        #: Calls come in, not started yet (call id -> message; insertion order is arrival order).
        self.waiting: dict[int, dict[str, Any]] = {}
        self._starter: asyncio.Handle | None = None

    def on_message(self, message: dict[str, Any]) -> None:
        if self.backend is None:
            self.backend = self.server.backend_for(Hello.model_validate(message))
            self.link.send({"op": "ready"})
            if "openai" in sys.modules:  # never the SDK's import for a run the cache may answer
                # Its client is built while the pytest process builds its first requests
                # (client.py connects before them), not when the first of them comes in.
                asyncio.get_running_loop().call_soon(self.backend.prepare)
            return
        if message.get("op") == "cancel":
            call_id = message.get("id")
            task = self.tasks.get(call_id)  # type: ignore[arg-type]
            if task is not None:
                task.cancel()
            self.waiting.pop(call_id, None)  # type: ignore[arg-type]
            return
        self.waiting[message["id"]] = message
        if self._starter is None:
            self._starter = asyncio.get_running_loop().call_soon(self._start_some)

    def _start_some(self) -> None:
        self._starter = None
        loop = asyncio.get_running_loop()
        for _ in range(min(STARTS_PER_TURN, len(self.waiting))):
            call_id = next(iter(self.waiting))
            message = self.waiting.pop(call_id)
            task = loop.create_task(self.server.complete(self.backend, message, self.link))  # type: ignore[arg-type]
            self.tasks[call_id] = task
            task.add_done_callback(lambda _t, i=call_id: self.tasks.pop(i, None))
        if self.waiting:  # the rest on a later turn, after the loop has polled its sockets
            self._starter = loop.call_soon(self._start_some)

    def on_lost(self, _exc: Exception | None) -> None:
        self.waiting.clear()
        if self._starter is not None:
            self._starter.cancel()
            self._starter = None
        for task in list(self.tasks.values()):
            task.cancel()


async def main_async(socket_path: str) -> None:
    server = SdkServer()
    loop = asyncio.get_running_loop()
    listener = await loop.create_unix_server(server.connection, socket_path, backlog=1024)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    # Parent gone (finished, killed, crashed): stdin reaches EOF.
    loop.add_reader(sys.stdin.fileno(), lambda: stop.set() if not os.read(sys.stdin.fileno(), 4096) else None)
    async with listener:
        await stop.wait()
    for backend in server.backends.values():
        with contextlib.suppress(Exception):
            await backend.aclose()


#: What the SDK's HTTP stack imports only when its first client is built (openai 3's ``httpx2``
#: imports ``httpcore2`` for the client's SSL context: ~50 modules). A name missing in another
#: SDK version is skipped; tests/test_sdk_process.py checks that nothing is left for the client.
CLIENT_IMPORTS = ("httpcore2",)


def warm_client_imports() -> None:
    """Import :data:`CLIENT_IMPORTS` at start-up, with the SDK: the first client took 70-110 ms
    to build, a later one 35-50 (its SSL context), and the first client is built on the way of
    the run's first request. Only imports, which the first client would make anyway: a throwaway
    client built instead cost its own SSL context too, on the way of a hello that came
    meanwhile."""
    for name in CLIENT_IMPORTS:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def main() -> None:
    # Ctrl-C and a terminal's hang-up go to the whole process group: the pytest process handles
    # them and closes its connections; this process follows when its parent closes stdin.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if IMPORT_ON_FIRST_CALL not in sys.argv[2:]:  # else the backend imports it on first use
        import openai  # noqa: F401  (the import this process exists to take off the pytest process)
        import aiohttp  # noqa: F401

        warm_client_imports()

    socket_path = sys.argv[1]
    asyncio.run(main_async(socket_path))
    # A clean stop leaves nothing behind, also when the parent was killed and cannot clean up: the
    # socket, the log beside it (it only matters after a crash), the lock file and their folder
    # (the lock itself goes with this process; launcher.py). Killed too, a later run sweeps it.
    folder = os.path.dirname(socket_path)
    for path in (socket_path, os.path.join(folder, LOG_NAME), os.path.join(folder, LOCK_NAME)):
        with contextlib.suppress(OSError):
            os.unlink(path)
    with contextlib.suppress(OSError):
        os.rmdir(folder)
    # Nothing is left to flush (the log is unbuffered): skip the interpreter's teardown of the SDK's
    # modules, which the pytest process would otherwise wait for at its own exit.
    os._exit(0)


if __name__ == "__main__":
    main()
