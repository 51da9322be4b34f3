"""CachedModel: hits skip the model, the key covers what changes the answer, files stay whole."""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from fake_openai_server import FakeOpenAIServer, reply, scripted, completion, error_body
from pytest_toolbench.models.base import (
    CallContext,
    ChatRequest,
    ChatResponse,
    ModelCallError,
    Sampling,
)
from pytest_toolbench.models.cache import CachedModel, ResponseStore
from pytest_toolbench.models.spec import BackendSpec
from pytest_toolbench.models.openai_backend import OpenAIBackend

CTX = CallContext(case_id="case-1")
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


class CountingModel:
    """In-process ChatModel: answers with a counter so a cached answer is recognisable."""

    def __init__(self, name: str = "counting", base_url: str = "http://x/v1", fail: bool = False):
        self.name = name
        self.base_url = base_url
        self.fail = fail
        self.calls = 0

    async def complete(self, request: ChatRequest, ctx: CallContext) -> ChatResponse:
        self.calls += 1
        if self.fail:
            raise ModelCallError("http_500", "down")
        return ChatResponse(message={"role": "assistant", "content": f"answer {self.calls}"},
                            model=self.name, latency_s=0.5)

    async def aclose(self) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        return {"backend": "counting", "model": self.name, "base_url": self.base_url}


def request(**kwargs) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": "hi"}], **kwargs)


def complete(model, req: ChatRequest) -> ChatResponse:
    return asyncio.run(model.complete(req, CTX))


def test_second_identical_call_makes_no_http_request(tmp_path):
    with FakeOpenAIServer(reply(content="once")) as server:
        inner = OpenAIBackend(BackendSpec(model="m", base_url=server.base_url, api_key="k", max_retries=0))
        model = CachedModel(inner, tmp_path)
        first = complete(model, request(tools=TOOLS))
        second = complete(model, request(tools=TOOLS))
        asyncio.run(model.aclose())
    assert len(server.requests) == 1
    assert not first.cached and second.cached
    assert second.message == first.message and second.usage == first.usage
    assert model.cache_stats.as_dict() == {"hits": 1, "misses": 1, "writes": 1,
                                           "unreadable": 0, "write_errors": 0}
    assert model.stats.attempts == 1  # the backend's counters show through the wrapper


def test_cache_persists_across_instances(tmp_path):
    inner = CountingModel()
    assert complete(CachedModel(inner, tmp_path), request()).content == "answer 1"
    again = complete(CachedModel(inner, tmp_path), request())
    assert again.cached and again.content == "answer 1" and inner.calls == 1


@pytest.mark.parametrize(
    "variant",
    [
        request(sampling=Sampling(temperature=0.7)),
        request(sampling=Sampling(max_tokens=1024)),
        request(tools=TOOLS),
        request(tools=TOOLS, tool_choice="required"),
        ChatRequest(messages=[{"role": "user", "content": "hi!"}]),
    ],
    ids=["temperature", "max_tokens", "tools", "tool_choice", "messages"],
)
def test_anything_that_changes_the_answer_changes_the_key(tmp_path, variant):
    inner = CountingModel()
    model = CachedModel(inner, tmp_path)
    complete(model, request())
    assert complete(model, variant).content == "answer 2"
    assert inner.calls == 2


def test_model_name_url_and_key_extra_are_in_the_key(tmp_path):
    base = CachedModel(CountingModel("a"), tmp_path)
    keys = {
        base.key_for(request()),
        CachedModel(CountingModel("b"), tmp_path).key_for(request()),
        CachedModel(CountingModel("a", base_url="http://y/v1"), tmp_path).key_for(request()),
        CachedModel(CountingModel("a"), tmp_path, {"template": "abc"}).key_for(request()),
        CachedModel(CountingModel("a"), tmp_path, {"template": "abd"}).key_for(request()),
    }
    assert len(keys) == 5
    # a managed server's changing port must not defeat the cache
    one = CachedModel(CountingModel("a", "http://127.0.0.1:1/v1"), tmp_path, include_base_url=False)
    two = CachedModel(CountingModel("a", "http://127.0.0.1:2/v1"), tmp_path, include_base_url=False)
    assert one.key_for(request()) == two.key_for(request())


def test_errors_are_not_cached(tmp_path):
    handler = scripted((500, {}, error_body(500)), (200, {}, completion("recovered")))
    with FakeOpenAIServer(handler) as server:
        model = CachedModel(OpenAIBackend(BackendSpec(model="m", base_url=server.base_url, api_key="k", max_retries=0)), tmp_path)
        with pytest.raises(ModelCallError):
            complete(model, request())
        assert not list(tmp_path.rglob("*.json"))
        assert complete(model, request()).content == "recovered"
        assert complete(model, request()).cached
    assert len(server.requests) == 2


def test_corrupt_entry_is_a_miss_and_gets_rewritten(tmp_path):
    inner = CountingModel()
    model = CachedModel(inner, tmp_path)
    complete(model, request())
    entry = model.store.path_for(model.key_for(request()))
    entry.write_text('{"format": 1, "key": "trunc')
    fresh = complete(model, request())
    assert not fresh.cached and inner.calls == 2 and model.cache_stats.unreadable == 1
    assert complete(model, request()).cached


def test_entries_are_sharded_and_leave_no_temp_files(tmp_path):
    model = CachedModel(CountingModel(), tmp_path)
    complete(model, request())
    key = model.key_for(request())
    assert model.store.path_for(key) == tmp_path / key[:2] / key[2:4] / f"{key}.json"
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == [f"{key}.json"]


# -- many processes on one cache --------------------------------------------------------------

KEYS = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(4)]


def _payload(writer: int, round_: int) -> ChatResponse:
    # Large enough that a torn write would be visible; content checksummed by its own shape.
    body = f"{writer}-{round_}-" + "x" * 200_000
    return ChatResponse(message={"role": "assistant", "content": body}, model=str(len(body)))


def _hammer(cache_dir: str, writer: int, rounds: int, errors: Any) -> None:
    store = ResponseStore(Path(cache_dir))
    for round_ in range(rounds):
        for key in KEYS:
            store.save(key, _payload(writer, round_))
            loaded, unreadable = store.load(key)
            if unreadable or loaded is None or loaded.model != str(len(loaded.content)):
                errors.put(f"writer {writer} round {round_}: bad read of {key[:8]}")


def test_two_processes_hammering_the_same_keys_never_corrupt(tmp_path):
    context = multiprocessing.get_context("fork")
    errors = context.Queue()
    workers = [context.Process(target=_hammer, args=(str(tmp_path), w, 40, errors))
               for w in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    problems = []
    while not errors.empty():
        problems.append(errors.get())
    assert problems == []
    store = ResponseStore(tmp_path)
    for key in KEYS:
        loaded, unreadable = store.load(key)
        assert loaded is not None and not unreadable
    assert not [p for p in tmp_path.rglob(".tmp-*")]
