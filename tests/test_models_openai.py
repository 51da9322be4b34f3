"""OpenAIBackend against a real local HTTP server: wire format, retries, errors, concurrency."""

from __future__ import annotations

import asyncio
import email.utils
import json
import time

import pytest

from fake_openai_server import (
    FakeOpenAIServer,
    completion,
    delayed,
    error_body,
    fail_then,
    reply,
    scripted,
    tool_call,
)
from refusing_port import hold_port_of

from pytest_toolbench.benchmarks import registry
from pytest_toolbench.benchmarks.base import run_open_protocols
from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.base import CallContext, ChatRequest, ModelCallError, Sampling
from pytest_toolbench.models.cache import CachedModel
from pytest_toolbench.models.factory import ModelConfigError, build_model
from pytest_toolbench.models.open_protocol import OpenProtocolModel
from pytest_toolbench.models.spec import BackendSpec, ServerInfo
from pytest_toolbench.models.openai_backend import OpenAIBackend, attempt_bound_s, retry_after_seconds
from pytest_toolbench.models.oracle import OracleModel
from pytest_toolbench.models.replay import ReplayModel

CTX = CallContext(case_id="case-1")
TOOLS = [{"type": "function", "function": {"name": "lookup", "description": "d",
                                           "parameters": {"type": "object", "properties": {}}}}]


def backend(server: FakeOpenAIServer, **kwargs) -> OpenAIBackend:
    options = dict(timeout_s=5.0, max_retries=3, concurrency=8, backoff_initial_s=0.01,
                   backoff_max_s=0.05)
    options.update(kwargs)
    return OpenAIBackend(BackendSpec(model="test-model", base_url=server.base_url, api_key="sk-secret", **options))


def run(model, request: ChatRequest, ctx: CallContext = CTX):
    async def go():
        try:
            return await model.complete(request, ctx)
        finally:
            await model.aclose()

    return asyncio.run(go())


def request(**kwargs) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": "hi"}], **kwargs)


# -- wire format ------------------------------------------------------------------------------


def test_request_body_and_text_reply():
    with FakeOpenAIServer(reply(content="hello", completion_tokens=7)) as server:
        model = backend(server)
        response = run(model, request(sampling=Sampling(temperature=0.0, max_tokens=32, seed=3)))
    body = server.requests[0]
    assert body["model"] == "test-model"
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["temperature"] == 0.0 and body["max_tokens"] == 32 and body["seed"] == 3
    assert "tools" not in body and "tool_choice" not in body and "top_p" not in body
    assert response.message == {"role": "assistant", "content": "hello"}
    assert response.usage.completion_tokens == 7 and response.usage.prompt_tokens == 10
    assert response.finish_reason == "stop" and response.model == "fake-model"
    assert response.parse_failure is None and not response.cached and response.latency_s > 0
    assert model.stats.attempts == 1 and model.stats.retries == 0


@pytest.mark.parametrize("sampling", [
    Sampling(), Sampling(temperature=None), Sampling(temperature=0.7, max_tokens=None, top_p=0.9, seed=3),
    Sampling.model_validate({"seed": 1, "top_p": 0.5, "max_tokens": 5, "temperature": 1}),
    Sampling(temperature=0.0).model_copy(update={"seed": 4, "temperature": 0.2}),
    Sampling.model_validate_json('{"max_tokens": 3, "temperature": 0}'),
])
def test_sampling_fields_go_into_the_body_in_declaration_order_none_left_out(sampling):
    """The body's sampling keys, values and order (hence the request's bytes) are those of the
    sampling's dump, however it was built (kwargs, validated out of order, copied with an
    update, from JSON as the SDK process gets it)."""
    dumped = {k: v for k, v in sampling.model_dump().items() if v is not None}
    kwargs = sampling.as_request_kwargs()
    assert list(kwargs.items()) == list(dumped.items())
    assert [type(v) for v in kwargs.values()] == [type(v) for v in dumped.values()]
    with FakeOpenAIServer(reply(content="ok")) as server:
        run(backend(server), request(sampling=sampling))
    assert list(server.requests[0]) == ["model", "messages", *dumped]


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_both_http_transports_send_the_same_request_and_read_the_same_reply(transport):
    """--http-transport picks the SDK's HTTP client; the wire format and the reply must not
    depend on it (aiohttp is the default for its CPU cost per request, issue 11)."""
    call = tool_call("lookup", {"q": "x"}, call_id="call_1")
    with FakeOpenAIServer(reply(content=None, tool_calls=[call])) as server:
        model = backend(server, http_transport=transport)
        response = run(model, request(tools=TOOLS, tool_choice="auto"))
        client_type = " ".join(k.__name__ for k in type(model._new_client(server.base_url)._client).__mro__)
    assert server.requests[0]["tools"] == TOOLS and server.requests[0]["tool_choice"] == "auto"
    assert response.message["tool_calls"][0]["function"]["name"] == "lookup"
    assert ("AiohttpClient" in client_type) is (transport == "aiohttp"), client_type


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_a_server_hanging_up_mid_request_is_a_connection_error_not_a_timeout(transport):
    """aiohttp under the SDK reports every connection error as a connect timeout; the error kind
    (and so the report) must still say the server hung up."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def hang_up() -> None:
        for _ in range(2):  # the attempt and its one retry
            conn, _ = listener.accept()
            conn.recv(65536)
            conn.close()

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    model = OpenAIBackend(BackendSpec(model="m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", timeout_s=5, max_retries=1,
                          backoff_initial_s=0.01, http_transport=transport))
    with pytest.raises(ModelCallError) as info:
        run(model, request())
    listener.close()
    assert info.value.kind == "connection", info.value


def test_aiohttp_is_the_default_transport():
    assert RunSettings().http_transport == "aiohttp"
    assert OpenAIBackend(BackendSpec(model="m", base_url="http://127.0.0.1:1/v1", api_key="k")).http_transport == "aiohttp"


def test_tool_call_reply_keeps_none_content_and_sends_tools():
    call = tool_call("lookup", {"q": "x"}, call_id="call_1")
    with FakeOpenAIServer(reply(tool_calls=[call])) as server:
        response = run(backend(server), request(tools=TOOLS, tool_choice="auto"))
    body = server.requests[0]
    assert body["tools"] == TOOLS and body["tool_choice"] == "auto"
    assert response.message == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "lookup", "arguments": '{"q": "x"}'}}],
    }
    assert response.finish_reason == "tool_calls" and response.parse_failure is None


def test_parse_failure_is_attached():
    text = '<tool_call>\n{"name": "lookup", "arguments": {"q": "x"}}\n</tool_call>'
    with FakeOpenAIServer(reply(content=text)) as server:
        response = run(backend(server), request(tools=TOOLS))
    assert response.parse_failure is not None
    assert response.parse_failure.reason == "unextracted_tool_call"


def test_describe_never_leaks_the_key():
    model = OpenAIBackend(BackendSpec(model="m", base_url="http://127.0.0.1:9/v1", api_key="sk-secret"))
    info = model.describe()
    assert info["backend"] == "openai" and info["model"] == "m"
    assert info["base_url"] == "http://127.0.0.1:9/v1"
    assert "sk-secret" not in json.dumps(info)


# -- retries ----------------------------------------------------------------------------------


def test_429_retry_after_honoured_then_500_then_success():
    handler = scripted(
        (429, {"Retry-After": "1"}, error_body(429)),
        (500, {}, error_body(500)),
        (200, {}, completion("ok")),
    )
    with FakeOpenAIServer(handler) as server:
        model = backend(server)
        response = run(model, request())
    assert response.content == "ok"
    assert len(server.requests) == 3
    waited = server.arrivals[1] - server.arrivals[0]
    assert waited >= 0.95, waited  # backoff alone would be ~0.01 s
    # The 1 s asked for, then the 500's backoff (0.01-0.05 s): planned waits, which load does not move.
    assert 1.0 < model.stats.retry_wait_s <= 1.05, model.stats.retry_wait_s
    assert model.stats.retries == 2 and model.stats.attempts == 3
    assert model.stats.errors == {"http_429": 1, "http_500": 1}


def test_latency_of_a_retried_call_includes_the_waits():
    """Issue 23: a reply that came after a 429 and a 0.5 s wait took 0.5 s or more, not the last
    request's few milliseconds; the waits are also in details.endpoint_retries.wait_s."""
    from pytest_toolbench.models.call_log import CURRENT_CALL_LOG, CaseCallLog

    log = CaseCallLog()
    handler = fail_then(1, reply(content="ok"), headers={"retry-after-ms": "500"})
    with FakeOpenAIServer(handler) as server:
        model = backend(server)

        async def go():
            CURRENT_CALL_LOG.set(log)
            try:
                return await model.complete(request(), CTX)
            finally:
                await model.aclose()

        started = time.perf_counter()
        response = asyncio.run(go())
        elapsed = time.perf_counter() - started
    assert log.details()["endpoint_retries"]["wait_s"] == pytest.approx(0.5)
    assert 0.5 <= response.latency_s <= elapsed, (response.latency_s, elapsed)


def test_retry_after_ms_header_honoured():
    handler = fail_then(1, reply(content="ok"), headers={"retry-after-ms": "400"})
    with FakeOpenAIServer(handler) as server:
        assert run(backend(server), request()).content == "ok"
    waited = server.arrivals[1] - server.arrivals[0]
    assert 0.38 <= waited < 1.0, waited


def test_retry_after_parsing():
    now = time.time()
    future = email.utils.formatdate(now + 30, usegmt=True)
    assert 28 <= retry_after_seconds({"Retry-After": future}, now=now) <= 30
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"Retry-After-Ms": "1500"}) == 1.5
    assert retry_after_seconds({"Retry-After": email.utils.formatdate(now - 60)}, now=now) == 0
    assert retry_after_seconds({"Retry-After": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_always_500_gives_model_call_error_after_all_attempts():
    with FakeOpenAIServer(lambda body, i: (500, {}, error_body(500))) as server:
        model = backend(server, max_retries=2)
        with pytest.raises(ModelCallError) as info:
            run(model, request())
    assert info.value.kind == "http_500"
    assert len(server.requests) == 3
    assert "3 attempt" in str(info.value)
    assert model.stats.failures == 1 and model.stats.retries == 2


def test_the_retry_loop_is_built_only_after_a_retryable_failure(monkeypatch):
    """The first attempt goes straight to the SDK (tenacity's set-up on every call was ~10% of
    the SDK process's CPU per call, perf/sdk_process_cpu.py). A call that succeeds at once, or
    fails with an error that is never retried, builds no retry loop; one whose first attempt may
    be retried goes on in tenacity's loop with that failure as its attempt 1, so counts, waits
    and the error's attempt count are those of a loop that made every attempt."""
    import pytest_toolbench.models.openai_backend as module

    built: list[dict] = []
    real = module.AsyncRetrying

    def counting(**kwargs):
        built.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(module, "AsyncRetrying", counting)
    with FakeOpenAIServer(reply(content="ok")) as server:
        model = backend(server)
        assert run(model, request()).content == "ok"
    assert built == [] and model.stats.attempts == 1 and model.stats.retries == 0
    with FakeOpenAIServer(lambda body, i: (400, {}, error_body(400))) as server:
        model = backend(server)
        with pytest.raises(ModelCallError):
            run(model, request())
    assert built == [] and len(server.requests) == 1
    handler = scripted((429, {"Retry-After": "0"}, error_body(429)), (503, {}, error_body(503)),
                       (200, {}, completion("ok")))
    with FakeOpenAIServer(handler) as server:
        model = backend(server)
        assert run(model, request()).content == "ok"
    assert len(built) == 1 and len(server.requests) == 3
    assert model.stats.attempts == 3 and model.stats.retries == 2
    assert model.stats.errors == {"http_429": 1, "http_503": 1}
    with FakeOpenAIServer(lambda body, i: (500, {}, error_body(500))) as server:
        model = backend(server, max_retries=0)
        with pytest.raises(ModelCallError) as info:
            run(model, request())
    assert len(built) == 1 and len(server.requests) == 1 and "1 attempt" in str(info.value)


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_errors_fail_at_once(status):
    with FakeOpenAIServer(lambda body, i: (status, {}, error_body(status))) as server:
        with pytest.raises(ModelCallError) as info:
            run(backend(server), request())
    assert info.value.kind == f"http_{status}"
    assert len(server.requests) == 1


def test_timeouts_are_retried():
    handler = delayed(1.5, reply(content="late but fine"), only_first=1)
    with FakeOpenAIServer(handler) as server:
        model = backend(server, timeout_s=0.3)
        response = run(model, request())
    assert response.content == "late but fine"
    assert len(server.requests) == 2
    assert model.stats.errors == {"timeout": 1}


def test_persistent_timeout_kind():
    with FakeOpenAIServer(delayed(1.0, reply(content="x"))) as server:
        with pytest.raises(ModelCallError) as info:
            run(backend(server, timeout_s=0.2, max_retries=1), request())
    assert info.value.kind == "timeout"
    assert len(server.requests) == 2


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_connection_refused_kind(transport):
    """A closed port is "connection refused", in the kind and the words: the SDK's aiohttp
    transport calls it "Request timed out.", which sent users after --request-timeout."""
    with FakeOpenAIServer(reply(content="x")) as server:
        url = server.base_url
    hold_port_of(url)  # closed, and refusing: no other process's server takes it meanwhile
    model = OpenAIBackend(BackendSpec(model="m", base_url=url, api_key="k", timeout_s=2, max_retries=1, backoff_initial_s=0.01,
                          http_transport=transport))
    with pytest.raises(ModelCallError) as info:
        run(model, request())
    assert info.value.kind == "connection_refused"
    assert "timed out" not in info.value.message.lower() and url in info.value.message
    assert "refused" in info.value.message
    assert model.stats.attempts == 2


@pytest.mark.parametrize(
    "payload",
    ["not json at all", {"id": "x", "object": "chat.completion", "choices": []},
     {"choices": [{"index": 0}]},
     # tool_calls not in the API's shape: every runner read call["function"] as an object, and
     # ToolHop and FamilyTool failed the case with an AttributeError traceback (internal_error)
     completion(None, [{"foo": "bar"}, "str", 5]), completion(None, [None]),
     {"choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": {"a": 1}}}]},
     completion(None, [{"id": "c1", "type": "function", "function": "some_tool"}]),
     # content that is no text: str(6) matched a gold answer "6" and scored correct
     {"choices": [{"index": 0, "message": {"role": "assistant", "content": 6}}]},
     {"choices": [{"index": 0, "message": {"role": "assistant", "content": {"text": "6"}}}]},
     {"choices": [{"index": 0, "message": {"role": "assistant", "content": True}}]}],
    ids=["not_json", "no_choices", "no_message", "tool_calls_garbage", "tool_call_null",
         "tool_calls_object", "function_text", "content_number", "content_object", "content_bool"],
)
def test_malformed_reply_is_retried_like_a_5xx_then_an_error_not_a_crash(payload):
    with FakeOpenAIServer(lambda body, i: (200, {}, payload)) as server:
        model = backend(server)
        with pytest.raises(ModelCallError) as info:
            run(model, request())
    assert info.value.kind == "bad_response"
    assert len(server.requests) == 4  # 1 + max_retries, as for a 500
    assert model.stats.errors["bad_response"] == 4


@pytest.mark.parametrize("payload", ["not json at all", {"choices": []}, {"choices": [{"index": 0}]}])
def test_one_invalid_200_then_a_completion_scores(payload):
    handler = scripted((200, {}, payload), (200, {}, completion("fine")))
    with FakeOpenAIServer(handler) as server:
        response = run(backend(server), request())
    assert response.message["content"] == "fine"
    assert len(server.requests) == 2


def test_retry_after_is_capped_by_the_setting():
    """A server asking for 1000 s waits only retry_after_max_s (here 0.2 s)."""
    handler = fail_then(1, reply("ok"), headers={"Retry-After": "1000"})
    with FakeOpenAIServer(handler) as server:
        model = backend(server, retry_after_max_s=0.2)
        started = time.monotonic()
        response = run(model, request())
        elapsed = time.monotonic() - started
    assert response.message["content"] == "ok"
    assert elapsed >= 0.2, elapsed
    assert model.stats.retry_wait_s == pytest.approx(0.2)  # not 1000 s (no clock: load would move it)


def test_request_timeout_bounds_each_attempt_not_the_call():
    """A 1.5 s reply with a 0.5 s attempt timeout: three attempts each time out, then an error."""
    with FakeOpenAIServer(delayed(1.5, reply("late"))) as server:
        model = backend(server, timeout_s=0.5, max_retries=2)
        started = time.monotonic()
        with pytest.raises(ModelCallError) as info:
            run(model, request())
        elapsed = time.monotonic() - started
    # A timeout of the whole call would stop at the first attempt; none at all would get "late".
    assert info.value.kind == "timeout" and model.stats.attempts == 3
    assert elapsed >= 0.5 * 3, elapsed


def test_retries_are_recorded_in_the_case_call_log():
    from pytest_toolbench.models.call_log import CURRENT_CALL_LOG, CaseCallLog

    handler = scripted((429, {"Retry-After": "0"}, error_body(429)), (503, {}, error_body(503)),
                       (200, {}, completion("ok")))
    log = CaseCallLog()
    with FakeOpenAIServer(handler) as server:
        model = backend(server)

        async def go():
            CURRENT_CALL_LOG.set(log)
            try:
                return await model.complete(request(), CallContext(case_id="c", turn=2))
            finally:
                await model.aclose()

        asyncio.run(go())
    details = log.details()
    assert details["endpoint_retries"]["count"] == 2
    assert details["endpoint_retries"]["statuses"] == {"http_429": 1, "http_503": 1}
    assert [a["turn"] for a in details["endpoint_retries"]["attempts"]] == [2, 2]
    assert "lost_turns" not in details


@pytest.mark.parametrize("status", [429, 500, 503])
def test_upstream_lost_turns_does_not_retry_an_http_error_and_loses_the_turn(status):
    from pytest_toolbench.models.base import LostTurn
    from pytest_toolbench.models.call_log import CURRENT_CALL_LOG, CaseCallLog

    log = CaseCallLog()
    with FakeOpenAIServer(fail_then(5, reply("ok"), status=status)) as server:
        model = backend(server, upstream_lost_turns=True)

        async def go():
            CURRENT_CALL_LOG.set(log)
            try:
                return await model.complete(request(), CallContext(case_id="c", turn=1))
            finally:
                await model.aclose()

        with pytest.raises(LostTurn) as info:
            asyncio.run(go())
        assert len(server.requests) == 1  # upstream: an HTTP error body is not retried
    assert info.value.kind == f"http_{status}"
    assert log.lost_turns == [{"turn": 1, "kind": f"http_{status}", "message": log.lost_turns[0]["message"]}]


# -- concurrency ------------------------------------------------------------------------------


@pytest.mark.parametrize("concurrency,expected", [(32, 32), (4, 4)])
def test_semaphore_bounds_requests_in_flight(concurrency, expected):
    with FakeOpenAIServer(delayed(0.3, reply(content="x"))) as server:
        model = backend(server, concurrency=concurrency)

        async def go():
            try:
                return await asyncio.gather(
                    *(model.complete(request(), CallContext(case_id=f"c{i}")) for i in range(32))
                )
            finally:
                await model.aclose()

        started = time.monotonic()
        responses = asyncio.run(go())
        elapsed = time.monotonic() - started
    assert len(responses) == 32 and len(server.requests) == 32
    if expected == 32:
        assert server.max_in_flight >= 28, server.max_in_flight  # at once, not one after another
    else:
        assert server.max_in_flight == 4
        assert elapsed >= 8 * 0.3 * 0.95


def test_backend_survives_a_new_event_loop():
    with FakeOpenAIServer(reply(content="x")) as server:
        model = backend(server)
        assert asyncio.run(model.complete(request(), CTX)).content == "x"
        assert asyncio.run(model.complete(request(), CTX)).content == "x"
        asyncio.run(model.aclose())


# -- factory ----------------------------------------------------------------------------------


def test_factory_backends(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert isinstance(build_model(RunSettings(model="oracle")), OracleModel)

    recording = tmp_path / "rec.jsonl"
    recording.write_text('{"case_id": "a", "responses": []}\n')
    assert isinstance(build_model(RunSettings(model=f"replay:{recording}")), ReplayModel)

    with pytest.raises(ModelConfigError, match="OPENAI_API_KEY"):
        build_model(RunSettings(model="gpt-4o", backend="openai"))

    local = build_model(RunSettings(model="m", base_url="http://localhost:8000/v1",
                                    cache_dir=tmp_path / "c"))
    assert isinstance(local, CachedModel) and isinstance(local.inner, OpenAIBackend)
    assert local.describe()["base_url"] == "http://localhost:8000/v1"

    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://example.invalid/v1")
    remote = build_model(RunSettings(model="gpt-4o", use_cache=False, max_retries=2,
                                     concurrency=3))
    assert isinstance(remote, OpenAIBackend)
    assert remote.base_url == "https://example.invalid/v1" and remote.spec.key() == "sk-env"
    assert remote.max_retries == 2 and remote.concurrency == 3

    vllm = build_model(RunSettings(model="smollm2-135m", backend="vllm", cache_dir=tmp_path),
                       server=ServerInfo(base_url="http://127.0.0.1:41234/v1",
                                         served_model="HuggingFaceTB/x",
                                         identity={"args": ["--tool-call-parser", "hermes"]}),
                       open_protocols=run_open_protocols(registry()))
    # vLLM defaults to upstream's open protocol: raw text parsed outside the cache (ToolHop
    # code/evaluation_open.py)
    assert isinstance(vllm, OpenProtocolModel) and vllm.plan.series == "qwen25"
    vllm = vllm.inner
    assert isinstance(vllm, CachedModel) and vllm.name == "smollm2-135m"
    assert vllm.inner.model == "HuggingFaceTB/x" and vllm.describe()["backend"] == "vllm"
    with pytest.raises(ModelConfigError):
        build_model(RunSettings(model="smollm2-135m", backend="vllm"))


def test_factory_openai_model_talks_http(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeOpenAIServer(reply(content="via factory")) as server:
        model = build_model(RunSettings(model="m", base_url=server.base_url,
                                        cache_dir=tmp_path))
        assert run(model, request()).content == "via factory"
        model = build_model(RunSettings(model="m", base_url=server.base_url,
                                        cache_dir=tmp_path))
        again = run(model, request())
    assert again.cached and len(server.requests) == 1


def test_oracle_model():
    async def go(ctx):
        return await OracleModel().complete(request(), ctx)

    ctx = CallContext(case_id="c", oracle=lambda req: {"role": "assistant", "content": "42"})
    assert asyncio.run(go(ctx)).content == "42"
    with pytest.raises(ModelCallError) as info:
        asyncio.run(go(CallContext(case_id="c")))
    assert info.value.kind == "oracle_unavailable"


def test_context_overflow_400_is_its_own_error_and_not_retried():
    from fake_openai_server import FakeOpenAIServer, error_body

    from pytest_toolbench.models.base import ContextLengthExceeded

    vllm_text = (
        "This model's maximum context length is 2048 tokens. However, you requested 2100 tokens "
        "(1900 in the messages, 200 in the completion). Please reduce the length of the messages."
    )

    def handler(body, index):
        return 400, {}, error_body(400, vllm_text)

    async def call(url):
        backend = OpenAIBackend(BackendSpec(model="m", base_url=url, api_key="k", max_retries=3))
        try:
            await backend.complete(ChatRequest(messages=[{"role": "user", "content": "x"}]),
                                   CallContext(case_id="c"))
        finally:
            await backend.aclose()

    with FakeOpenAIServer(handler) as server:
        with pytest.raises(ContextLengthExceeded) as info:
            asyncio.run(call(server.base_url))
        assert len(server.requests) == 1
    assert info.value.kind == "context_length_exceeded" and "2048" in info.value.message

    def other(body, index):
        return 400, {}, error_body(400, "unknown field 'foo'")

    with FakeOpenAIServer(other) as server:
        with pytest.raises(ModelCallError) as info:
            asyncio.run(call(server.base_url))
    assert info.value.kind == "http_400" and not isinstance(info.value, ContextLengthExceeded)


# -- a reply that never ends ------------------------------------------------------------------
class DrippingServer:
    """Answers every request with its headers at once, then its body a byte every 0.2 s: each
    read is quick, the reply never done (a stalled proxy, an overloaded server)."""

    def __init__(self) -> None:
        import socket
        import threading

        self.sock = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        import threading

        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn) -> None:
        body = json.dumps(completion("I do not know.")).encode()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(body))
            for byte in body:
                if self.stop.wait(0.2):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_request_timeout_bounds_a_reply_that_drips_in(transport):
    """--request-timeout bounds the attempt, not each read: a body sent a byte at a time kept
    the call (and its case) waiting for ever, whatever the timeout (the SDK's is per read)."""
    server = DrippingServer()
    try:
        model = OpenAIBackend(BackendSpec(model="m", base_url=server.base_url, api_key="k",
                                          timeout_s=1.0, max_retries=0, http_transport=transport))
        started = time.monotonic()
        with pytest.raises(ModelCallError) as info:
            run(model, request())
        took = time.monotonic() - started
    finally:
        server.close()
    assert info.value.kind == "timeout"
    assert "no reply within --request-timeout 1 s" in info.value.message
    assert took < attempt_bound_s(1.0) + 5  # the body alone would take 0.2 s x its ~250 bytes


@pytest.mark.parametrize("usage, expected", [
    ({"prompt_tokens": 12, "completion_tokens": 3}, (12, 3)),
    ({"prompt_tokens": -5, "completion_tokens": "lots"}, (0, 0)),  # summed into the run's total
    ({"prompt_tokens": True, "completion_tokens": 2.5}, (0, 0)),
    (None, (0, 0)),
])
def test_token_counts_that_are_no_counts_add_nothing(usage, expected):
    from pytest_toolbench.models.openai_backend import usage_of

    counted = usage_of({"choices": [], "usage": usage})
    assert (counted.prompt_tokens, counted.completion_tokens) == expected


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_a_reply_that_does_not_decode_is_named_not_a_dropped_connection(transport):
    """A plain JSON body sent as ``Content-Encoding: gzip``: the SDK says "Connection error."
    and the hint said the endpoint dropped the connection, though it had replied; the message
    now quotes the decoder's own words."""
    body = json.dumps(completion("ok"))
    with FakeOpenAIServer(lambda b, i: (200, {"Content-Encoding": "gzip"}, body)) as server:
        model = backend(server, max_retries=0)
        with pytest.raises(ModelCallError) as info:
            run(model, request())
    assert info.value.kind == "connection"
    assert "incorrect header check" in info.value.message, info.value.message
    assert "reply came cut short or undecodable" in info.value.message


def test_content_that_is_no_text_names_its_json_type():
    payload = {"choices": [{"index": 0, "message": {"role": "assistant", "content": 6}}]}
    with FakeOpenAIServer(lambda body, i: (200, {}, payload)) as server:
        with pytest.raises(ModelCallError) as info:
            run(backend(server, max_retries=0), request())
    assert info.value.kind == "bad_response"
    assert "reply's content is a JSON number, not a string: 6" in info.value.message
