"""The open-model protocol is each benchmark's choice (``--backend vllm``, decoding ``open``).

One real model stack (HTTP to a fake OpenAI-compatible server, the response cache, the open
protocol wrapper) serves every benchmark of a run. ToolHop declares ``parsed`` (its upstream
parse_qwen25 / parse_llama31 read the raw text); FamilyTool declares ``text``: the raw text
reaches its runner, which parses it as vLLM's Hermes2ProToolParser (one bad block voids all
calls, UnifiedToolHub models/qwen_2_5.py) or Llama3JsonToolParser. Benchmarks that declare nothing (ToolBeHonest,
Meta-Bench: no tools in the request, the runner reads the text) get the text untouched.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from fake_openai_server import FakeOpenAIServer, completion, scripted
from pytest_toolbench.benchmarks import registry
from pytest_toolbench.benchmarks.base import DEFAULT_OPEN_PROTOCOL, open_protocol_of
from pytest_toolbench.benchmarks.familytool.benchmark import FAMILYTOOL, load_kg
from pytest_toolbench.benchmarks.familytool.memo import ExtractionMemo
from pytest_toolbench.benchmarks.familytool.options import FamilyToolOptions
from pytest_toolbench.benchmarks.familytool.runner import FamilyToolRunner
from pytest_toolbench.benchmarks.familytool.tooluse import llama3_json_calls
from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.spec import ServerInfo
from pytest_toolbench.models.base import CallContext, ChatRequest
from pytest_toolbench.benchmarks import registry as _registry
from pytest_toolbench.benchmarks.base import run_open_protocols
from pytest_toolbench.models.factory import build_model as _build_model
from pytest_toolbench.models.open_protocol import OpenProtocolModel


def build_model(settings, **kw):
    """The factory as the fixtures call it: with the registered benchmarks' open protocols."""
    return _build_model(settings, open_protocols=run_open_protocols(_registry()), **kw)

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]


def name_and_parameters(call: dict) -> dict:
    return {"name": call["name"], "parameters": call["parameters"]}


def golden_case():
    return next(c for c in FAMILYTOOL.load_cases(None, ("tooluse-golden",))
                if c.labels["split"] == "b" and c.sample.index == 0)


def hermes(call: dict, key: str = "arguments") -> str:
    return f"<tool_call>\n{json.dumps({'name': call['name'], key: call['parameters']})}\n</tool_call>"


def vllm_model(server: FakeOpenAIServer, tmp_path: Path, family: str):
    settings = RunSettings(model=f"{family}-instruct", backend="vllm", cache_dir=tmp_path / "cache")
    assert settings.open_protocol  # vLLM's default decoding is the open protocol
    return build_model(settings, server=ServerInfo(base_url=server.base_url, served_model="served",
                                                   identity={"family": family}))


def runner(tmp_path: Path) -> FamilyToolRunner:
    opts = FamilyToolOptions()
    return FamilyToolRunner(opts, lambda s: load_kg(None, s, opts), lambda s: None,
                            ExtractionMemo(tmp_path / "memo"), backend="vllm")


def run(runner_: FamilyToolRunner, case, model):
    async def go():
        try:
            return await runner_.run(case, model)
        finally:
            await model.aclose()

    return asyncio.run(go())


def test_declared_protocols():
    protocols = {name: open_protocol_of(b) for name, b in registry().items()}
    assert protocols["toolhop"] == "parsed" and protocols["familytool"] == "text"
    # Neither declares one: plain text, never another benchmark's parser.
    assert protocols["toolbehonest"] == protocols["metabench"] == DEFAULT_OPEN_PROTOCOL == "text"


@pytest.mark.parametrize("bad_block", [True, False])
def test_familytool_scores_a_bad_block_as_hermes2pro(tmp_path, bad_block):
    case = golden_case()
    gold = case.sample.golden_calls[0]
    # A good block, then one with "parameters" (Hermes2Pro requires "arguments"): upstream's vLLM
    # parser returns no calls at all. ToolHop's parse_qwen25 would keep the good one.
    text = hermes(gold) + ("\n" + hermes(gold, key="parameters") if bad_block else "")
    with FakeOpenAIServer(scripted((200, {}, completion(text)))) as server:
        model = vllm_model(server, tmp_path, "qwen2.5")
        assert isinstance(model, OpenProtocolModel)
        result = run(runner(tmp_path), case, model)
    sent = server.requests[0]
    # Upstream's raw tool documents reach the chat template (response included, no wrapper);
    # no tools= field, so the server's tool parser never runs and the raw text comes back.
    assert "tools" not in sent and "tool_choice" not in sent
    assert sent["chat_template_kwargs"]["tools"] == case.sample.candidate_tools
    assert (sent["temperature"], sent["top_p"], sent["max_tokens"]) == (0.7, 0.8, 512)
    assert result.details["raw_output"] == text  # the runner saw the raw text
    assert result.details["open_protocol"] == "text" and result.details["text_parser"] == "hermes"
    if bad_block:
        assert result.details["predicted_calls"] == []
        assert (result.values["em"], result.values["tool_acc"], result.values["value_acc"]) == (0, 0, 0)
    else:
        assert result.details["predicted_calls"] == [name_and_parameters(gold)]
        assert result.values["em"] == 1.0


def test_same_model_gives_toolhop_its_parser_and_others_the_text(tmp_path):
    text = hermes({"name": "f", "parameters": {"a": 1}}) + "\n" + hermes({"name": "f", "parameters": {}}, "parameters")
    with FakeOpenAIServer(scripted((200, {}, completion(text)))) as server:
        model = vllm_model(server, tmp_path, "qwen2.5")

        async def go():
            try:
                out = {}
                for case_id, tools in (("toolhop-9001-mandatory", TOOLS), ("familytool-b-0-tooluse-golden", TOOLS),
                                       ("metabench-d1-t0", None), ("toolbehonest-x-0-L1-solvable", None)):
                    request = ChatRequest(messages=[{"role": "user", "content": case_id}], tools=tools)
                    # The runner names its benchmark; the case id is never read for it.
                    ctx = CallContext(case_id=case_id, benchmark=case_id.split("-")[0])
                    out[case_id] = (await model.complete(request, ctx)).message
                return out
            finally:
                await model.aclose()

        messages = asyncio.run(go())
    toolhop = messages["toolhop-9001-mandatory"]
    assert [json.loads(c["function"]["arguments"]) for c in toolhop["tool_calls"]] == [{"a": 1}]  # parse_qwen25
    for case_id in ("familytool-b-0-tooluse-golden", "metabench-d1-t0", "toolbehonest-x-0-L1-solvable"):
        assert messages[case_id]["content"] == text and not messages[case_id].get("tool_calls")
    assert model.describe()["open_protocols"]["familytool"] == "text"


def test_llama_replies_use_llama3_json_and_llama_sampling(tmp_path):
    case = golden_case()
    gold = case.sample.golden_calls[0]
    text = json.dumps({"name": gold["name"], "parameters": gold["parameters"]})
    with FakeOpenAIServer(scripted((200, {}, completion(text)))) as server:
        result = run(runner(tmp_path), case, vllm_model(server, tmp_path, "llama3.1"))
    sent = server.requests[0]
    assert (sent["temperature"], sent["top_p"]) == (0.5, 0.9)  # UnifiedToolHub's Llama_3_1 defaults
    assert sent["skip_special_tokens"] is False  # evaluate_model's SamplingParams for local models
    assert result.details["text_parser"] == "llama3_json"
    assert result.details["predicted_calls"] == [name_and_parameters(gold)] and result.values["em"] == 1.0


@pytest.mark.parametrize(("text", "names"), [
    ('{"name": "a", "arguments": {"x": 1}}', ["a"]),
    ('<|python_tag|>{"name": "a", "parameters": {}}; {"name": "b", "parameters": {}}', ["a", "b"]),
    ('Sure: {"name": "a", "parameters": {}}', []),  # must start with "{" or the tag
    ('{"name": "a", "parameters": {}}\n\n\n', []),  # the "; " skip lands on whitespace: all lost
    ('{"name": "a"}', []),  # neither arguments nor parameters
])
def test_llama3_json_parser_quirks(text, names):
    assert [c["name"] for c in llama3_json_calls(text)] == names
