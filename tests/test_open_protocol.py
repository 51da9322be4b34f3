"""The upstream open-model protocol end to end: real HTTP, real cache, the ToolHop runner.

Raw Qwen2.5 / Llama-3.1 texts come back from a local OpenAI-compatible server; the harness must
send the tools with ``tool_choice="none"``, parse the raw text with upstream's parsers, run the
calls, and keep the raw text so that re-parsing it gives exactly the calls the harness used.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from pathlib import Path

import pytest

from fake_openai_server import FakeOpenAIServer, completion, scripted, tool_call
from test_toolhop_runner import FakeSandbox
from pytest_toolbench.benchmarks.dataset_errors import DatasetWarning
from pytest_toolbench.benchmarks.toolhop.benchmark import TOOLHOP
from pytest_toolbench.benchmarks.toolhop.decoding import toolhop_sampling
from pytest_toolbench.benchmarks.toolhop.options import ToolHopOptions
from pytest_toolbench.benchmarks.toolhop.runner import ToolHopRunner
from pytest_toolbench.benchmarks.toolhop.schema import load_toolhop_file
from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.spec import ServerInfo
from pytest_toolbench.models.base import CallContext, ChatRequest, ModelCallError
from pytest_toolbench.models.cache import CachedModel
from pytest_toolbench.benchmarks import registry as _registry
from pytest_toolbench.benchmarks.base import run_open_protocols
from pytest_toolbench.models.factory import build_model as _build_model
from pytest_toolbench.benchmarks.toolhop.open_parsers import deterministic_ids, parse_open_reply
from pytest_toolbench.models.open_protocol import OpenProtocolModel, plan_open_protocol
from pytest_toolbench.benchmarks.toolhop.open_parsers import TOOLHOP_OPEN_PARSER
from pytest_toolbench.results.case_result import Outcome
from shared_data import BUNDLED_TOOLHOP as BUNDLED


def build_model(settings, **kw):
    """The factory as the fixtures call it: with the registered benchmarks' open protocols."""
    return _build_model(settings, open_protocols=run_open_protocols(_registry()), **kw)


@pytest.fixture(scope="module")
def records():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        return {r.id: r for r in load_toolhop_file(BUNDLED)}


def raw_replies(*texts: str):
    return scripted(*[(200, {}, completion(t)) for t in texts])


def qwen_call(name: str, args: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


def run_case(settings: RunSettings, record, scenario: str = "mandatory"):
    model = build_model(settings)
    runner = ToolHopRunner(FakeSandbox(), ToolHopOptions(), toolhop_sampling(settings))

    async def go():
        try:
            return await runner.run(TOOLHOP.make_case(record, scenario), model)
        finally:
            await model.aclose()

    return asyncio.run(go()), model


def open_settings(server: FakeOpenAIServer, tmp_path: Path, model: str, **kw) -> RunSettings:
    return RunSettings(model=model, base_url=server.base_url, decoding="open",
                       cache_dir=tmp_path / "cache", **kw)


def assert_raw_outputs_reproduce_the_transcript(result, series: str) -> None:
    """Upstream's parser applied to the recorded raw outputs gives the harness's messages."""
    assistants = [m for m in result.transcript if m["role"] == "assistant"]
    raw = result.details["raw_outputs"]
    assert [r["turn"] for r in raw] == list(range(len(assistants)))
    for turn, (entry, message) in enumerate(zip(raw, assistants)):
        reparsed = parse_open_reply(series, entry["text"], deterministic_ids(f"{result.case_id}|{turn}"))
        assert reparsed == message


def test_qwen25_chain_runs_on_raw_text(records, tmp_path):
    record = records[9004]  # 5 hops, gold "d"
    texts = [
        qwen_call("book_author_identifier", {"title": "Don Quixote"}),
        "First the country.\n" + qwen_call("birthplace_country_finder", {"person": "Miguel de Cervantes"}),
        # malformed JSON that json_repair fixes (trailing comma, missing brace)
        '<tool_call>\n{"name": "capital_city_lookup", "arguments": {"country": "Spain",}\n</tool_call>',
        qwen_call("string_reverser", {"input_string": "Madrid"}),
        qwen_call("character_extractor", {"text": "dirdaM"}),
        "<answer>d</answer>",
    ]
    with FakeOpenAIServer(raw_replies(*texts)) as server:
        settings = open_settings(server, tmp_path, "Qwen/Qwen2.5-7B-Instruct")
        result, model = run_case(settings, record)
        bodies = list(server.requests)
        again, _ = run_case(settings, record)  # from the cache: raw replies, same parse
        assert len(server.requests) == len(bodies)

    assert isinstance(model, OpenProtocolModel) and isinstance(model.inner, CachedModel)
    assert result.outcome is Outcome.PASSED and result.values["calls"] == 5.0
    assert result.values["query_error"] == 0.0
    # requests: tools rendered by the template, server parser off, open decoding
    assert all(b["tool_choice"] == "none" and len(b["tools"]) == 5 for b in bodies)
    assert all(b["max_tokens"] == 1024 and b["temperature"] == 0.0 for b in bodies)
    assert "stop_token_ids" not in bodies[0]  # not a vLLM backend: no vLLM-only fields
    # upstream's message shape goes back to the endpoint on the next turn
    second = bodies[1]["messages"][1]
    assert set(second) == {"role", "content", "tool_calls"} and second["content"] is None
    assert second["tool_calls"][0]["id"] == bodies[1]["messages"][2]["tool_call_id"]
    assert result.transcript[3]["content"] == "First the country."
    assert result.transcript[5]["tool_calls"][0]["function"]["arguments"] == '{"country": "Spain"}'
    assert result.transcript[-1] == {"role": "assistant", "content": "<answer>d</answer>", "tool_calls": None}
    assert_raw_outputs_reproduce_the_transcript(result, "qwen25")
    assert again.transcript == result.transcript and again.cached_calls == 6
    info = model.describe()
    assert info["protocol"] == "upstream-open" and info["open_parser"] == "qwen25"
    assert info["family"] == "qwen2.5"


def test_llama31_keeps_only_the_first_call(records, tmp_path):
    record = records[9005]
    texts = [
        '[{"name": "multiply_numbers", "parameters": {"numbers": [6, 3]}}, '
        '{"name": "text_letter_count", "parameters": {"text": ["Kobe"]}}]',
        '{"name": "modulo_calculator", "parameters": {"dividend": 18, "divisor": 9,',  # cut off
        "<answer>0</answer>",
    ]
    with FakeOpenAIServer(raw_replies(*texts)) as server:
        result, _ = run_case(open_settings(server, tmp_path, "meta-llama/Llama-3.1-8B-Instruct"), record)
    calls = [m for m in result.transcript if m["role"] == "assistant" and m["tool_calls"]]
    assert [c["tool_calls"][0]["function"]["name"] for c in calls] == ["multiply_numbers", "modulo_calculator"]
    assert all(len(c["tool_calls"]) == 1 for c in calls)
    assert [m["content"] for m in result.transcript if m["role"] == "tool"] == ["18", "0"]
    assert result.outcome is Outcome.PASSED
    assert_raw_outputs_reproduce_the_transcript(result, "llama31")


def test_llama31_parser_failure_is_no_answer_not_an_error(records, tmp_path):
    with FakeOpenAIServer(raw_replies("[" * 5000)) as server:
        result, _ = run_case(open_settings(server, tmp_path, "meta-llama/Llama-3.1-8B-Instruct"),
                             records[9001])
    assert result.outcome is Outcome.FAILED and result.error is None
    assert result.details["answer_status"] == "no_answer"
    assert result.details["stop_reason"].startswith("unparsable_reply")
    assert result.details["raw_outputs"] == [{"turn": 0, "text": "[" * 5000}]


def test_direct_open_sends_no_tools_and_no_tool_choice(records, tmp_path):
    with FakeOpenAIServer(raw_replies("<answer>6</answer>")) as server:
        result, _ = run_case(open_settings(server, tmp_path, "Qwen/Qwen2.5-7B-Instruct"),
                             records[9001], "direct")
    body = server.requests[0]
    assert body["tools"] is None and "tool_choice" not in body
    assert result.outcome is Outcome.PASSED


def test_server_parser_option_keeps_the_servers_tool_calls(records, tmp_path):
    reply = completion(None, [tool_call("letter_counter", {"text": "Steven"}, call_id="s1")])
    with FakeOpenAIServer(scripted((200, {}, reply), (200, {}, completion("<answer>6</answer>")))) as server:
        settings = RunSettings(model="Qwen/Qwen2.5-7B-Instruct", base_url=server.base_url,
                               decoding="open-server-parser", use_cache=False)
        assert not settings.open_protocol and toolhop_sampling(settings).max_tokens == 1024
        result, model = run_case(settings, records[9001])
    assert not isinstance(model, OpenProtocolModel)
    assert "tool_choice" not in server.requests[0]
    assert result.transcript[1]["tool_calls"][0]["id"] == "s1"
    assert "raw_outputs" not in result.details


def test_endpoint_that_ignores_tool_choice_none_is_refused(tmp_path):
    reply = completion(None, [tool_call("f", {})])
    with FakeOpenAIServer(scripted((200, {}, reply))) as server:
        model = build_model(open_settings(server, tmp_path, "Qwen/Qwen2.5-7B-Instruct"))
        tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]

        async def go():
            try:
                return await model.complete(
                    ChatRequest(messages=[{"role": "user", "content": "x"}], tools=tools),
                    CallContext(case_id="c"),
                )
            finally:
                await model.aclose()

        with pytest.raises(ModelCallError) as info:
            asyncio.run(go())
    assert info.value.kind == "open_protocol_unsupported"


def test_vllm_default_is_the_open_protocol_with_the_series_stop_ids(tmp_path):
    settings = RunSettings(model="Qwen2.5-7B-Instruct", backend="vllm", cache_dir=tmp_path)
    assert settings.resolved_decoding == "open" and settings.open_protocol
    with FakeOpenAIServer(raw_replies("<answer>x</answer>")) as server:
        model = build_model(settings, server=ServerInfo(
            base_url=server.base_url, served_model="q",
            identity={"family": "qwen2.5", "server_args": ["--x"]}))

        async def go():
            try:
                return await model.complete(
                    ChatRequest(messages=[{"role": "user", "content": "x"}]), CallContext(case_id="c")
                )
            finally:
                await model.aclose()

        response = asyncio.run(go())
    assert server.requests[0]["stop_token_ids"] == [151645, 151643]
    assert response.message == {"role": "assistant", "content": "<answer>x</answer>", "tool_calls": None}
    assert model.inner.key_extra["open_protocol"]["stop_token_ids"] == [151645, 151643]
    assert model.describe()["backend"] == "vllm"


@pytest.mark.parametrize(
    ("model", "backend", "family", "series", "stop"),
    [
        ("smollm2-135m", "vllm", "smollm2", "qwen25", None),  # our Hermes template
        ("Qwen/Qwen2.5-7B-Instruct", "openai", "qwen2.5", "qwen25", None),  # not vLLM: no ids
        ("meta-llama/Llama-3.1-8B-Instruct", "vllm", "llama3.1", "llama31", [128001, 128008, 128009]),
        ("meta-llama/Llama-3.3-70B-Instruct", "vllm", "llama3.3", "llama31", None),
        ("mistralai/Mistral-7B-Instruct-v0.3", "vllm", "mistral", None, None),
        ("gpt2", "openai", "unknown", "qwen25", None),
    ],
)
def test_plans(model, backend, family, series, stop):
    plan = plan_open_protocol(model, backend, parser=TOOLHOP_OPEN_PARSER)
    assert (plan.family, plan.series, plan.extra_body.get("stop_token_ids")) == (family, series, stop)


def test_no_upstream_parser_passes_through(tmp_path):
    plan = plan_open_protocol("mistralai/Mistral-7B-Instruct-v0.3", "openai", parser=TOOLHOP_OPEN_PARSER)
    assert plan.describe()["protocol"] == "server-parser"
    request = ChatRequest(messages=[], tools=[{"type": "function", "function": {"name": "f"}}])
    inner = type("Inner", (), {"name": "m"})()
    assert OpenProtocolModel(inner, plan).shape(request) is request


def test_replay_and_oracle_are_never_wrapped(tmp_path):
    recording = tmp_path / "rec.jsonl"
    recording.write_text('{"case_id": "a", "responses": []}\n')
    for name in ("oracle", f"replay:{recording}"):
        settings = RunSettings(model=name, decoding="open")
        assert not settings.open_protocol
        assert not isinstance(build_model(settings), OpenProtocolModel)


def test_each_case_records_the_protocol_it_was_parsed_with(records, tmp_path):
    with FakeOpenAIServer(raw_replies("<answer>6</answer>")) as server:
        result, _ = run_case(open_settings(server, tmp_path, "meta-llama/Llama-3.1-8B-Instruct"),
                             records[9001])
    assert result.details["protocol"] == {
        "protocol": "upstream-open", "family": "llama3.1", "open_parser": "llama31",
    }
    assert result.details["raw_outputs"] == [{"turn": 0, "text": "<answer>6</answer>"}]
