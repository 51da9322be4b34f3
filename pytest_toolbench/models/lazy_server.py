"""The managed vLLM server as its clients see it: asked for on the run's first cache miss, and
waited for (servers/owner.py starts it).

Why lazily: a repeated run whose replies are all cached must make no model call and start no
server (a start costs a minute or more on a CPU), and ``--cache-only`` must never start one.
Which request a case sends first is known only by running it, so the server cannot be judged
unneeded up front; it is started when the first request misses the cache instead.

How: the controller owns the server through a :class:`~pytest_toolbench.servers.owner.ServerOwner`,
whose thread waits for a request file in the run folder. Any process that needs the server
(:class:`LazyServerModel`, under the response cache) creates that file and waits for the owner's
answer file: ``vllm-ready.json`` (:class:`ServerAnswer`) or ``vllm-failed.json`` (why). Files,
because xdist gives workers no channel back to the controller, and they work alike in every
process.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, Callable


from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.models.base import CallContext, ChatModel, ChatRequest, ChatResponse, ModelCallError
from pytest_toolbench.models.errors import encode_hint, kind_hint

REQUEST_FILE = "vllm-start.request"
READY_FILE = "vllm-ready.json"
FAILED_FILE = "vllm-failed.json"
POLL_S = 0.2


class ServerAnswer(DeferredModel):
    """The owner's answer once the server serves (``vllm-ready.json``)."""

    base_url: str
    pid: int | None = None
    startup_s: float | None = None


class ServerUnavailable(ModelCallError):
    """The managed server failed to start: every call that needed it fails with this."""


async def wait_for_server(rendezvous: Path, timeout_s: float) -> ServerAnswer:
    """Ask the owner for the server and wait for its answer."""
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
                return ServerAnswer.model_validate(answer)
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
    from the owner's answer.
    """

    def __init__(self, template: ChatModel, connect: Callable[[ServerAnswer], ChatModel],
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
