"""Which models hold their own requests to ``--concurrency`` (models/base.py
``limits_its_requests``), so the scheduler may start a few cases more than that, and how a
freed place is handed on first (models/openai_backend.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.base import CallContext, ChatRequest, limits_its_requests
from pytest_toolbench.models.cache import CachedModel
from pytest_toolbench.models.lazy_server import LazyServerModel
from pytest_toolbench.models.openai_backend import OpenAIBackend
from pytest_toolbench.models.oracle import OracleModel
from pytest_toolbench.models.recording import RecordingModel
from pytest_toolbench.models.sdk_process.client import RemoteBackend
from pytest_toolbench.models.spec import BackendSpec
from pytest_toolbench.runtime.case_runtime import CaseRuntime


def openai_backend(concurrency: int = 8) -> OpenAIBackend:
    return OpenAIBackend(BackendSpec(model="m", base_url="http://127.0.0.1:9/v1", api_key="k",
                                     concurrency=concurrency, timeout_s=5.0))


class NoLimit:
    """A provider's model from outside that says nothing about its requests."""

    name = "plain"

    async def complete(self, request: ChatRequest, ctx: CallContext) -> Any:
        raise NotImplementedError

    async def aclose(self) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        return {}


def test_the_openai_backend_and_the_sdk_process_limit_their_requests(tmp_path: Path):
    assert limits_its_requests(openai_backend())
    assert limits_its_requests(RemoteBackend.__new__(RemoteBackend))  # a class-level promise
    # through wrappers, and a managed server's backend before it started (its template)
    assert limits_its_requests(RecordingModel(CachedModel(openai_backend(), tmp_path), tmp_path / "r.jsonl"))
    lazy = LazyServerModel(openai_backend(), lambda answer: openai_backend(), tmp_path / "rv", 1.0)
    assert limits_its_requests(lazy) and limits_its_requests(CachedModel(lazy, tmp_path))


def test_a_model_that_says_nothing_sets_no_limit_of_its_own(tmp_path: Path):
    assert not limits_its_requests(OracleModel())
    assert not limits_its_requests(NoLimit())
    assert not limits_its_requests(CachedModel(NoLimit(), tmp_path))  # the wrapper promises nothing
    assert not limits_its_requests(None)


def test_the_runtime_starts_ready_cases_only_for_a_limiting_model():
    settings = RunSettings(concurrency=8)
    assert CaseRuntime(settings, openai_backend()).scheduler.ready == 2
    assert CaseRuntime(settings, NoLimit()).scheduler.ready == 0  # the endpoint sees at most 8


def test_a_freed_place_goes_to_the_waiting_request_before_the_reply_is_passed_on(monkeypatch):
    """Concurrency 1, two calls: the second request is sent before the first call returns."""
    events: list[str] = []
    model = openai_backend(concurrency=1)

    class Client:
        async def post(self, path: str, *, body: dict[str, Any], cast_to: Any) -> dict[str, Any]:
            turn = body["messages"][0]["content"]
            events.append(f"sent {turn}")
            await asyncio.sleep(0.01)
            return {"model": "m", "choices": [{"index": 0, "finish_reason": "stop",
                                               "message": {"role": "assistant", "content": turn}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1}}

        async def close(self) -> None:
            pass

    monkeypatch.setattr(model, "_new_client", lambda url: Client())

    async def call(turn: str) -> None:
        request = ChatRequest(messages=[{"role": "user", "content": turn}])
        response = await model.complete(request, CallContext(case_id=turn))
        events.append(f"returned {response.message['content']}")

    async def go() -> None:
        await asyncio.gather(call("a"), call("b"))

    asyncio.run(go())
    assert events == ["sent a", "sent b", "returned a", "returned b"], events
