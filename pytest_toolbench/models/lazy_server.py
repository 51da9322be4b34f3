"""The managed vLLM server, started on the run's first cache miss and shared by all its processes.

Why lazily: a repeated run whose replies are all cached must make no model call and start no
server (a start costs a minute or more on a CPU), and ``--cache-only`` must never start one.
Which request a case sends first is known only by running it, so the server cannot be judged
unneeded up front; it is started when the first request misses the cache instead.

How: the controller (the xdist controller, or the only process with ``-n 0``) owns the
:class:`~pytest_toolbench.models.vllm_server.VLLMServer` through a :class:`ServerOwner`, whose
thread waits for a request file in the run folder. Any process that needs the server
(:class:`LazyServerModel`, under the response cache) creates that file and waits for the owner's
answer file: ``vllm-ready.json`` (URL, pid) or ``vllm-failed.json`` (why). Files, because xdist
gives workers no channel back to the controller, and they work alike in every process. The owner
thread forks the server and lives until it is stopped, so the server's parent-death signal still
fires if pytest dies.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any, Callable

from pytest_toolbench.fileio import atomic_write_bytes
from pytest_toolbench.models.base import CallContext, ChatModel, ChatRequest, ChatResponse, ModelCallError
from pytest_toolbench.models.errors import encode_hint, kind_hint

REQUEST_FILE = "vllm-start.request"
READY_FILE = "vllm-ready.json"
FAILED_FILE = "vllm-failed.json"
POLL_S = 0.2


class ServerOwner:
    """Controller side: starts ``server`` on the first request, stops it at the end."""

    def __init__(self, server: Any, rendezvous: Path, *, progress: Any = None, label: str = "") -> None:
        self.server = server
        self.rendezvous = Path(rendezvous)
        self.progress = progress  # runtime/startup_progress.StartupProgress, or None
        self.label = label or f"starting vLLM for {getattr(server, 'served_model_name', 'the model')}"
        self.startup_s: float | None = None
        self.error: str | None = None
        self._asked = threading.Event()
        self._stop = threading.Event()
        self._ready = threading.Event()  # set when started or failed
        self._thread: threading.Thread | None = None

    # -- controller API ------------------------------------------------------------------------
    def watch(self) -> None:
        """Start the owner thread (it does nothing until the server is asked for)."""
        self.rendezvous.mkdir(parents=True, exist_ok=True)
        for name in (REQUEST_FILE, READY_FILE, FAILED_FILE):  # a reused folder must not answer
            (self.rendezvous / name).unlink(missing_ok=True)
        self._thread = threading.Thread(target=self._run, name="toolbench-vllm-owner", daemon=True)
        self._thread.start()

    def ask(self) -> None:
        """Start the server now, in the background (a miss is certain: runtime/server.py)."""
        self._asked.set()

    def start_now(self, timeout_s: float | None = None) -> str:
        """Ask for the server and wait (the eager path); raises RuntimeError if it failed."""
        if self._thread is None:
            self.watch()
        self._asked.set()
        self._ready.wait(timeout_s)
        if self.error is not None or not self.started:
            raise RuntimeError(self.error or "vLLM did not start in time")
        return self.server.base_url

    @property
    def started(self) -> bool:
        return self.startup_s is not None and self.error is None

    def stop(self) -> None:
        """Stop the server (idempotent); a start still in progress is cut short."""
        self._stop.set()
        self.server.stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)

    # -- the owner thread ----------------------------------------------------------------------
    def _run(self) -> None:
        request = self.rendezvous / REQUEST_FILE
        while not self._stop.is_set():
            if self._asked.is_set() or request.exists():
                break
            self._stop.wait(POLL_S)
        else:
            return  # the run ended without needing the server
        started = time.monotonic()
        try:
            phase = (self.progress.phase(self.label, key="vLLM start", cancelled=self._stop.is_set)
                     if self.progress else None)
            if phase is not None:
                with phase:
                    self.server.start()
            else:
                self.server.start()
        except BaseException as exc:  # noqa: BLE001 - reported to every waiting process
            self.error = f"{exc}" if not self._stop.is_set() else "the run ended during vLLM start"
            self._answer(FAILED_FILE, {"message": self.error})
            if self.progress is not None and not self._stop.is_set():
                self.progress.line(f"could not start vLLM: {self.error}")
            self._ready.set()
            return
        self.startup_s = time.monotonic() - started
        self._answer(READY_FILE, {"base_url": self.server.base_url, "pid": self.server.pid,
                                  "startup_s": round(self.startup_s, 1)})
        self._ready.set()
        self._stop.wait()  # this thread forked the server: it must outlive it (PDEATHSIG)
        self.server.stop()

    def _answer(self, name: str, payload: dict[str, Any]) -> None:
        atomic_write_bytes(self.rendezvous / name, json.dumps(payload).encode(), durable=False)

    def info(self) -> dict[str, Any]:
        """What the run report says about the server: started or not, and how long it took."""
        return {"started": self.started, "startup_s": round(self.startup_s, 1) if self.startup_s else None,
                "error": self.error}


class ServerUnavailable(ModelCallError):
    """The managed server failed to start: every call that needed it fails with this."""


async def wait_for_server(rendezvous: Path, timeout_s: float) -> dict[str, Any]:
    """Ask the owner for the server and wait for its answer (``base_url``, ``pid``)."""
    folder = Path(rendezvous)
    request = folder / REQUEST_FILE
    if not request.exists():
        request.touch()
    deadline = time.monotonic() + timeout_s
    while True:
        for name in (READY_FILE, FAILED_FILE):
            try:
                answer = json.loads((folder / name).read_text(encoding="utf-8"))
            except (OSError, ValueError):  # not written yet (the write is atomic)
                continue
            if name == READY_FILE:
                return answer
            cause, option = kind_hint("server_start_failed")
            raise ServerUnavailable("server_start_failed", str(answer.get("message"))[:2000],
                                    attempts=0, hint=encode_hint(cause, option))
        if time.monotonic() > deadline:
            cause, option = kind_hint("server_start_failed")
            raise ServerUnavailable("server_start_failed",
                                    f"no vLLM server after {timeout_s:.0f} s of waiting",
                                    attempts=0, hint=encode_hint(cause, option))
        await asyncio.sleep(POLL_S)


class LazyServerModel:
    """A ChatModel whose endpoint is the managed server, started when the first call arrives.

    ``template`` is the backend as it will be (base_url unknown): its name and ``describe()``
    serve cache keys and runners before the start. ``connect(answer)`` builds the real backend
    from the owner's answer (``base_url``, ``pid``).
    """

    def __init__(self, template: ChatModel, connect: Callable[[dict[str, Any]], ChatModel],
                 rendezvous: Path, timeout_s: float) -> None:
        self.template = template
        self.name = template.name
        self._connect = connect
        self.rendezvous = Path(rendezvous)
        self.timeout_s = timeout_s
        self.inner: ChatModel | None = None
        self._pending: asyncio.Future[ChatModel] | None = None

    async def _inner(self) -> ChatModel:
        if self.inner is not None:
            return self.inner
        if self._pending is None or (self._pending.done() and self._pending.exception()):
            # one wait per process, shared by every case that is already calling
            self._pending = asyncio.ensure_future(self._open())
        return await asyncio.shield(self._pending)

    async def _open(self) -> ChatModel:
        answer = await wait_for_server(self.rendezvous, self.timeout_s)
        self.inner = self._connect(answer)
        return self.inner

    async def complete(self, request: ChatRequest, ctx: CallContext) -> ChatResponse:
        return await (await self._inner()).complete(request, ctx)

    async def aclose(self) -> None:
        if self.inner is not None:
            await self.inner.aclose()

    def describe(self) -> dict[str, Any]:
        return (self.inner or self.template).describe()

    def __getattr__(self, item: str) -> Any:  # backend stats etc. of the backend in use
        if item in ("inner", "template"):
            raise AttributeError(item)
        return getattr(self.inner or self.template, item)
