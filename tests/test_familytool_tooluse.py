"""Tool-use formatting, parsing and the strict UnifiedToolHub metrics (``models/``, ``benchmark/metrics.py``) on real records."""

from __future__ import annotations

import json

import pytest
from shared_data import REAL_FAMILYTOOL

from pytest_toolbench.benchmarks.familytool.schema import load_records
from pytest_toolbench.benchmarks.familytool.scoring import tooluse_values
from pytest_toolbench.benchmarks.familytool.tooluse import (
    build_request_parts,
    has_think_token,
    hermes_calls,
    openai_tool,
    parse_arguments,
    parse_reply,
)

pytestmark = pytest.mark.skipif(not REAL_FAMILYTOOL.exists(), reason="../shared datasets absent")


@pytest.fixture(scope="module")
def records():
    return load_records(REAL_FAMILYTOOL / "familytool-b.jsonl", "b")


def call(name, **params):
    return {"name": name, "parameters": params}


def test_metric_edge_cases_on_record_0(records):
    gold = records[0].golden_calls  # cancel_alarm(label="dinnertime_0002")
    ok = call("cancel_alarm", label="dinnertime_0002")
    assert tooluse_values(gold, [ok]) == {"em": 1.0, "em_per_tool": 1.0, "tool_acc": 1.0, "value_acc": 1.0}
    # Extra calls are not penalised.
    assert tooluse_values(gold, [call("set_alarm", time="x"), ok])["em"] == 1.0
    # Strict: case and whitespace in values matter; keys are stripped; missing key -> null.
    assert tooluse_values(gold, [call("cancel_alarm", label="Dinnertime_0002")]) == {
        "em": 0.0, "em_per_tool": 0.0, "tool_acc": 1.0, "value_acc": 0.0}
    assert tooluse_values(gold, [{"name": " cancel_alarm ", "parameters": {" label ": "dinnertime_0002"}}])["em"] == 1.0
    assert tooluse_values(gold, [call("cancel_alarm", time="dinnertime_0002")])["value_acc"] == 0.0
    # Wrong tool or no call: all zeros (Value Acc is 0, not undefined).
    assert tooluse_values(gold, [call("set_alarm", label="dinnertime_0002")]) == {
        "em": 0.0, "em_per_tool": 0.0, "tool_acc": 0.0, "value_acc": 0.0}
    assert tooluse_values(gold, []) == {"em": 0.0, "em_per_tool": 0.0, "tool_acc": 0.0, "value_acc": 0.0}
    # Same-name duplicates meet the gold through the json.dumps-sorted zip.
    assert tooluse_values(gold, [call("cancel_alarm", label="zzz"), ok])["em"] == 1.0
    assert tooluse_values(gold, [call("cancel_alarm", label="aaa"), ok]) == {
        "em": 0.0, "em_per_tool": 0.0, "tool_acc": 1.0, "value_acc": 0.0}
    # A call without parameters does not count at all.
    assert tooluse_values(gold, [{"name": "cancel_alarm"}])["tool_acc"] == 0.0


def test_int_values_are_type_sensitive(records):
    record = next(r for r in records if any(isinstance(v, int) for v in r.golden_calls[0]["parameters"].values()))
    gold = record.golden_calls[0]
    params = dict(gold["parameters"])
    key = next(k for k, v in params.items() if isinstance(v, int))
    params[key] = str(params[key])
    values = tooluse_values(record.golden_calls, [call(gold["name"], **params)])
    n = len(params)
    assert values == {"em": 0.0, "em_per_tool": 0.0, "tool_acc": 1.0, "value_acc": pytest.approx((n - 1) / n)}


def test_hermes_parsing_voids_everything_on_one_bad_block():
    good = '<tool_call>{"name": "cancel_alarm", "arguments": {"label": "x"}}</tool_call>'
    assert hermes_calls("<think>hmm</think>" + good) == [call("cancel_alarm", label="x")]
    assert hermes_calls(good + "<tool_call>{bad json}</tool_call>") == []
    assert hermes_calls('<tool_call>{"name": "a", "parameters": {}}</tool_call>') == []
    assert hermes_calls('<tool_call>{"name": "a", "arguments": {"k": 1}}') == [call("a", k=1)]  # unclosed
    assert parse_reply({"content": good}) == [call("cancel_alarm", label="x")]


def test_structured_arguments_fallbacks():
    message = {"tool_calls": [
        {"function": {"name": "a", "arguments": '{"k": "v"}'}},
        {"function": {"name": "b", "arguments": "{'k': 'v'}"}},
        {"function": {"name": "c", "arguments": "not json"}},
    ]}
    assert parse_reply(message) == [call("a", k="v"), call("b", k="v"), {"name": "c", "parameters": {}}]
    assert parse_arguments(None) == {}
    # nested past the stack: upstream's "else {}", not a RecursionError failing the case
    assert parse_arguments("[" * 200_000) == {}


def test_apirequester_conversion_on_real_docs(records):
    docs = [d for r in records for d in r.candidate_tools]
    listy = next(d for d in docs if isinstance(d["parameters"].get("properties"), list))
    converted = openai_tool(listy)["function"]
    names = [p["name"] for p in listy["parameters"]["properties"]]
    assert list(converted["parameters"]["properties"]) == names
    assert all(s["type"] == "string" for s in converted["parameters"]["properties"].values())
    int_doc = next(d for d in docs if isinstance(d["parameters"].get("properties"), dict)
                   and any(isinstance(s, dict) and s.get("type") == "int" for s in d["parameters"]["properties"].values()))
    types = {s["type"] for s in openai_tool(int_doc)["function"]["parameters"]["properties"].values()}
    assert "int" not in types and "integer" in types
    assert openai_tool({"name": "a.b", "description": "", "parameters": {}})["function"]["name"] == "a_b"
    assert "response" not in json.dumps(openai_tool(docs[0]))


def test_request_layouts(records):
    r = records[0]
    messages, tools, extra = build_request_parts(r.user, r.candidate_tools, "openai", "2025-05-26", "gpt-4o")
    assert messages == [{"role": "system", "content": "You are a helpful assistant.\nCurrent Date: 2025-05-26"},
                        {"role": "user", "content": r.user}]
    assert extra is None and tools == [openai_tool(d) for d in r.candidate_tools]
    messages, tools, extra = build_request_parts(r.user, r.candidate_tools, "vllm", "2025-05-26", "Qwen/Qwen2.5-7B-Instruct")
    assert messages[0]["content"] == ("You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
                                      "\n\nCurrent Date: 2025-05-26")
    # Qwen_2_5.get_prompt: apply_chat_template(tools=candidate_tools), the raw documents; evaluate_model
    # samples every local model with skip_special_tokens=False.
    assert tools is None and extra == {"chat_template_kwargs": {"tools": r.candidate_tools}, "skip_special_tokens": False}
    assert any("response" in d for d in extra["chat_template_kwargs"]["tools"])
    messages, _, _ = build_request_parts(r.user, r.candidate_tools, "vllm", "2025-05-26", "Qwen3-8B")
    assert messages[0]["content"] == "Current Date: 2025-05-26"


def test_exact_match_per_tool_is_the_share_of_gold_calls_fully_right():
    """ExactMatch-PerTool = all_matched / len(gold): one number per tool name, so two gold calls of
    two tools with one right give 0.5 (EM-AllTools 0)."""
    gold = [call("cancel_alarm", label="dinnertime_0002"), call("book_taxi", where_to="home_0001")]
    half = tooluse_values(gold, [call("cancel_alarm", label="dinnertime_0002"), call("book_taxi", where_to="x")])
    assert half == {"em": 0.0, "em_per_tool": 0.5, "tool_acc": 1.0, "value_acc": 0.5}
    assert tooluse_values([], []) == {"em": 1.0, "em_per_tool": 1.0, "tool_acc": 1.0, "value_acc": 1.0}
    assert tooluse_values([], [call("a")])["em"] == 0.0


def test_api_replies_count_only_structured_tool_calls():
    """APIRequester.get_tool_call reads message.tool_calls; <tool_call> text in content is ignored
    unless the named variant asks for it."""
    text = {"role": "assistant", "content": '<tool_call>{"name": "a", "arguments": {"k": 1}}</tool_call>'}
    assert parse_reply(text, "hermes", "openai") == []
    assert parse_reply(text, "hermes", "openai", api_text_tool_calls=True) == [call("a", k=1)]
    assert parse_reply(text, "hermes", "vllm") == [call("a", k=1)]


def test_think_vocab_reply_starting_with_a_tool_call_has_no_calls():
    """QwQ/Qwen3 (``</think>`` in the vocabulary): Hermes2Pro's content is None when the reply starts
    with <tool_call>, upstream's ``"</think>" in None`` raises, the bare except returns no calls."""
    block = '<tool_call>\n{"name": "a", "arguments": {"k": 1}}\n</tool_call>'
    assert hermes_calls(block, think_vocab=True) == []
    assert hermes_calls(block, think_vocab=False) == [call("a", k=1)]
    assert hermes_calls("<think>x</think>\n\n" + block, think_vocab=True) == [call("a", k=1)]
    assert hermes_calls("\n" + block, think_vocab=True) == [call("a", k=1)]
    assert hermes_calls('<tool_call>{"name": 3, "arguments": {}}</tool_call>') == []  # FunctionCall(name=3)


def test_deepseek_reasoner_prompt_and_reply(records):
    r = records[0]
    messages, tools, extra = build_request_parts(r.user, r.candidate_tools, "deepseek_r1", "2025-05-26", "deepseek-reasoner")
    assert tools is None and extra is None and len(messages) == 1 and messages[0]["role"] == "user"
    content = messages[0]["content"]
    assert content.startswith("You are a helpful Assistant.\n\nCurrent Date: 2025-05-26\n\nYou can use the following tools")
    assert "\n" + json.dumps(r.candidate_tools[0]) + "\n" in content and content.endswith(f"Query: {r.user}\n")
    reply = lambda text: parse_reply({"role": "assistant", "content": text}, "hermes", "deepseek_r1")  # noqa: E731
    assert reply('{"name": "a", "parameters": {"k": 1}}') == [call("a", k=1)]
    assert reply("[{'name': 'a', 'parameters': {}}, {'name': 'b'}]") == [call("a")]  # literal_eval; no parameters
    assert reply("I would call a") == [] and reply(None) == []


def test_think_token_from_a_model_folder_or_name(tmp_path):
    assert has_think_token("Qwen/QwQ-32B") and has_think_token("Qwen3-8B") and has_think_token("DeepSeek-R1-Distill-Qwen-7B")
    assert not has_think_token("Qwen/Qwen2.5-7B-Instruct") and not has_think_token("Meta-Llama-3.1-8B-Instruct")
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text('{"added_tokens_decoder": {"1": {"content": "</think>"}}}')
    assert has_think_token(str(folder))
    (folder / "tokenizer_config.json").write_text('{"added_tokens_decoder": {}}')
    assert not has_think_token(str(folder), "qwq")  # the folder decides before the name
