"""CachedModel: hits skip the model, the key covers what changes the answer, files stay whole."""

from __future__ import annotations

import asyncio
import errno
import hashlib
import multiprocessing
import os
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


def only_pack(cache: Path) -> Path:
    (pack,) = [p for p in cache.rglob("*") if p.is_file()]
    assert pack.parent.parent == cache / "packs" and pack.suffix == ".pack"
    return pack


def test_corrupt_entry_is_a_miss_and_gets_rewritten(tmp_path):
    inner = CountingModel()
    complete(CachedModel(inner, tmp_path), request())
    pack = only_pack(tmp_path)
    key = pack.read_bytes().split(b" ", 1)[0]
    pack.write_bytes(key + b' {"format": 1, "key": "trunc\n')
    model = CachedModel(inner, tmp_path)  # a later run
    fresh = complete(model, request())
    assert not fresh.cached and inner.calls == 2 and model.cache_stats.unreadable == 1
    assert complete(model, request()).cached
    assert complete(CachedModel(inner, tmp_path), request()).cached  # the rewrite wins for the next run too


def test_entries_are_appended_to_one_pack_per_store_in_the_models_folder(tmp_path):
    model = CachedModel(CountingModel(name="org/model:v1"), tmp_path)
    complete(model, request())
    complete(model, request(tools=TOOLS))
    pack = only_pack(tmp_path)
    assert pack.parent.name.startswith("org_model_v1-")
    lines = pack.read_bytes().split(b"\n")
    assert lines[2:] == [b""] and {line[:64].decode() for line in lines[:2]} == {
        model.key_for(request()), model.key_for(request(tools=TOOLS))}
    other = CachedModel(CountingModel(name="other"), tmp_path)
    complete(other, request())
    assert len({p.parent for p in tmp_path.rglob("*.pack")}) == 2  # a folder per model


def test_a_torn_last_line_is_ignored_and_the_failed_writer_starts_a_new_pack(tmp_path, monkeypatch):
    from pytest_toolbench.models import cache_store

    store = ResponseStore(tmp_path)
    good, torn = KEYS[0], KEYS[1]
    store.save(good, _payload(0, 0))
    real_write = os.write

    def short_then_full_disk(fd, data):
        monkeypatch.setattr(cache_store.os, "write", full_disk)
        return real_write(fd, bytes(data)[:100])

    def full_disk(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(cache_store.os, "write", short_then_full_disk)
    with pytest.raises(OSError):
        store.save(torn, _payload(0, 1))
    monkeypatch.setattr(cache_store.os, "write", real_write)
    store.save(KEYS[2], _payload(0, 2))
    assert len(list(tmp_path.rglob("*.pack"))) == 2
    reader = ResponseStore(tmp_path)
    assert reader.load(good)[0].content.startswith("0-0-")
    assert reader.load(torn) == (None, False)  # never indexed, so a plain miss
    assert reader.load(KEYS[2])[0].content.startswith("0-2-")


def test_a_full_disk_leaves_no_empty_pack_per_failed_entry(tmp_path, monkeypatch):
    """Each failed save closed its pack and the next opened a new one: on a full disk (where a
    file can still be made, not written) a run left a zero-byte pack for every reply."""
    from pytest_toolbench.models import cache_store

    store = ResponseStore(tmp_path)
    store.save(KEYS[0], _payload(0, 0))

    def full_disk(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(cache_store.os, "write", full_disk)
    for key in KEYS[1:4]:
        with pytest.raises(OSError):
            store.save(key, _payload(0, 1))
    packs = list(tmp_path.rglob("*.pack"))
    assert len(packs) == 1 and packs[0].stat().st_size > 0  # the pack written before the disk filled
    assert ResponseStore(tmp_path).load(KEYS[0])[0].content.startswith("0-0-")


def test_what_another_process_stores_meanwhile_is_found_on_a_miss(tmp_path, monkeypatch):
    from pytest_toolbench.models import cache_store

    reader, writer = ResponseStore(tmp_path), ResponseStore(tmp_path)
    assert reader.load(KEYS[0]) == (None, False)
    writer.save(KEYS[0], _payload(1, 0))
    monkeypatch.setattr(cache_store, "REFRESH_S", 0.0)
    assert reader.load(KEYS[0])[0].content.startswith("1-0-")
    writer.save(KEYS[1], _payload(1, 1))  # appended to a pack already indexed
    assert reader.load(KEYS[1])[0].content.startswith("1-1-")


def test_entries_of_the_older_one_file_layout_are_still_read(tmp_path):
    inner = CountingModel()
    model = CachedModel(inner, tmp_path)
    key = model.key_for(request())
    old = tmp_path / key[:2] / key[2:4] / f"{key}.json"
    old.parent.mkdir(parents=True)
    answer = ChatResponse(message={"role": "assistant", "content": "stored long ago"}, model="counting")
    old.write_bytes(ResponseStore.encode(key, answer))
    hit = complete(model, request())
    assert hit.cached and hit.content == "stored long ago" and inner.calls == 0


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
    assert len(list(tmp_path.rglob("*.pack"))) == 3  # one per writer, nothing else
    assert [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".pack"] == []


def test_the_index_holds_where_entries_are_not_the_entries(tmp_path):
    import tracemalloc

    writer = ResponseStore(tmp_path)
    keys = [hashlib.sha256(f"big-{i}".encode()).hexdigest() for i in range(300)]
    for i, key in enumerate(keys):
        writer.save(key, ChatResponse(message={"role": "assistant", "content": f"{i}-" + "z" * 8000}))
    writer.close()
    reader = ResponseStore(tmp_path)
    tracemalloc.start()
    try:
        assert reader.load(keys[0])[0].content.startswith("0-")
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 300_000  # 2.4 MB of entries indexed; about 0.3 KB each kept
    assert reader.load(keys[-1])[0].content.startswith("299-")
