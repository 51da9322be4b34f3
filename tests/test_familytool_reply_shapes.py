"""FamilyTool reply shapes, each scored as upstream's code scores it (or, where upstream's code
raises, as the fidelity ledger in benchmarks/familytool/README.md says the harness scores it).

The expected values were found by replaying every shape through upstream's own code outside this
repository: UnifiedToolHub @ c3c5fc7 (``models/llama_3_1.py``, ``models/base.py``,
``models/api_requester.py``, ``models/deepseek_r1.py``, ``benchmark/metrics.py`` and the per-sample
steps of ``benchmark/evaluate_model.py``) on top of vLLM 0.8's ``Llama3JsonToolParser`` and its
pydantic ``FunctionCall``/``ToolCall`` models.

* Llama-3.1 (``Llama_3_1`` -> ``BaseFormatter.get_tool_call`` -> ``Llama3JsonToolParser``): a call
  whose ``name`` is not a string makes ``FunctionCall(name=...)`` raise a ValidationError inside the
  parser's ``except Exception``: **no call of that reply survives**, the good ones included.
* gpt-4o (``APIRequester``): ``content: null`` beside ``tool_calls`` (what OpenAI sends) makes
  ``evaluate_model`` raise on ``len(result["content"])`` (ledger row 19); here the calls are scored.
* deepseek-reasoner (``DeepSeek_R1.get_tool_call``): content that parses to a number, a boolean or
  null, or a list holding one, makes ``"name" in t`` raise (ledger row 20); here such items are
  dropped and the rest scored.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fake_openai_server import FakeOpenAIServer, completion, scripted, tool_call
from shared_data import REAL_FAMILYTOOL

from pytest_toolbench.benchmarks.familytool.benchmark import FAMILYTOOL, load_kg
from pytest_toolbench.benchmarks.familytool.memo import ExtractionMemo
from pytest_toolbench.benchmarks.familytool.options import FamilyToolOptions
from pytest_toolbench.benchmarks.familytool.runner import FamilyToolRunner
from pytest_toolbench.benchmarks.familytool.schema import load_records
from pytest_toolbench.benchmarks.familytool.tooluse import LLAMA_BOT, llama3_json_calls, parse_reply
from pytest_toolbench.models.spec import BackendSpec, ServerInfo
from pytest_toolbench.models.openai_backend import OpenAIBackend

GOOD = '{"name": "cancel_alarm", "parameters": {"label": "dinnertime_0002"}}'
GOOD_CALL = {"name": "cancel_alarm", "parameters": {"label": "dinnertime_0002"}}
#: Every JSON value that is not a string: FunctionCall.name (pydantic ``str``) refuses each one.
NON_STRING_NAMES = [7, 0, -1, 1.5, None, True, False, [], ["cancel_alarm"], {}, {"name": "cancel_alarm"}]


# --- Llama3JsonToolParser (vLLM 0.8) on hand-made replies ------------------------------------------
@pytest.mark.parametrize("name", NON_STRING_NAMES, ids=lambda v: json.dumps(v))
def test_a_non_string_name_voids_every_call_of_the_reply(name):
    bad = json.dumps({"name": name, "parameters": {"label": "dinnertime_0002"}})
    bad_arguments = json.dumps({"name": name, "arguments": {}})
    assert llama3_json_calls(bad) == []
    assert llama3_json_calls(bad_arguments) == []
    assert llama3_json_calls(GOOD + "; " + bad) == []  # the good call before it is lost too
    assert llama3_json_calls(bad + "; " + GOOD) == []
    assert llama3_json_calls(LLAMA_BOT + GOOD + "; " + bad) == []
    assert parse_reply({"role": "assistant", "content": GOOD + "; " + bad}, "llama3_json", "vllm") == []


@pytest.mark.parametrize(("text", "calls"), [
    (GOOD, [GOOD_CALL]),
    ('{"name": "cancel_alarm", "arguments": {"label": "dinnertime_0002"}}', [GOOD_CALL]),
    # "arguments" wins when both keys are there (`obj["arguments"] if "arguments" in obj`).
    ('{"name": "cancel_alarm", "arguments": {"label": "x"}, "parameters": {"label": "y"}}',
     [{"name": "cancel_alarm", "parameters": {"label": "x"}}]),
    # Extra keys are ignored; an empty or padded string is a string (the metric strips names).
    ('{"type": "function", "name": "cancel_alarm", "parameters": {}}', [{"name": "cancel_alarm", "parameters": {}}]),
    ('{"name": "", "parameters": {}}', [{"name": "", "parameters": {}}]),
    ('{"name": " cancel_alarm ", "parameters": {}}', [{"name": " cancel_alarm ", "parameters": {}}]),
    # Missing name, or neither argument key: KeyError inside the parser's try -> no calls.
    ('{"parameters": {"label": "dinnertime_0002"}}', []),
    ('{"name": "cancel_alarm"}', []),
    (GOOD + '; {"parameters": {}}', []),
    # The arguments are json.dumps-ed into FunctionCall.arguments and read back by
    # BaseFormatter.safe_parse_arguments: any JSON value survives as the call's parameters.
    ('{"name": "cancel_alarm", "parameters": null}', [{"name": "cancel_alarm", "parameters": None}]),
    ('{"name": "cancel_alarm", "arguments": ["dinnertime_0002"]}', [{"name": "cancel_alarm", "parameters": ["dinnertime_0002"]}]),
    ('{"name": "cancel_alarm", "arguments": "dinnertime_0002"}', [{"name": "cancel_alarm", "parameters": "dinnertime_0002"}]),
    ('{"name": "cancel_alarm", "arguments": 3}', [{"name": "cancel_alarm", "parameters": 3}]),
    # A later value that is not an object (list, string, number) fails the whole reply.
    (GOOD + "; [1]", []),
    (GOOD + '; "arguments"', []),
    (GOOD + "; 5", []),
    # Separators: exactly two characters are skipped before the next raw_decode.
    (GOOD + ';\n{"name": "b", "parameters": {}}', [GOOD_CALL, {"name": "b", "parameters": {}}]),
    (GOOD + ';{"name": "b", "parameters": {}}', []),
    (GOOD + ' ; {"name": "b", "parameters": {}}', []),
    (GOOD + "\n\n", [GOOD_CALL]),
    (GOOD + "\n\n\n", []),
    ("[" + GOOD + "]", []),
    (" " + GOOD, []),
    # JSON too deep for the decoder: a RecursionError, caught by the parser like any other error.
    ('{"name": "a", "parameters": ' + "[" * 100_000 + "]" * 100_000 + "}", []),
])
def test_llama3_json_shapes(text, calls):
    assert llama3_json_calls(text) == calls


def test_hermes_parser_catches_what_vllm_catches():
    """Hermes2ProToolParser's ``except Exception`` also swallows a RecursionError: no calls."""
    deep = '<tool_call>{"name": "a", "arguments": ' + "[" * 100_000 + "]" * 100_000 + "}</tool_call>"
    assert parse_reply({"role": "assistant", "content": deep}, "hermes", "vllm") == []


# --- real-style replies through the runner -----------------------------------------------------------
needs_data = pytest.mark.skipif(not REAL_FAMILYTOOL.is_dir(), reason="../shared FamilyTool data absent")


def golden_cases(n: int) -> list:
    records = load_records(REAL_FAMILYTOOL / "familytool-b.jsonl", "b")[:n]
    return [FAMILYTOOL.make_case(record, "tooluse-golden") for record in records]


def make_runner(tmp_path: Path, backend: str) -> FamilyToolRunner:
    options = FamilyToolOptions()
    return FamilyToolRunner(options, lambda s: load_kg(None, s, options), lambda s: None,
                            ExtractionMemo(tmp_path / "memo"), backend=backend)


def run_all(runner: FamilyToolRunner, cases: list, model) -> list:
    async def go():
        try:
            return [await runner.run(case, model) for case in cases]  # in order: one reply each
        finally:
            await model.aclose()

    return asyncio.run(go())


def scores(result) -> tuple[float, float, float]:
    return result.values["em"], result.values["tool_acc"], result.values["value_acc"]


def llama_replies(gold: dict) -> list[tuple[str, tuple[float, float, float]]]:
    """What Llama-3.1-8B-Instruct writes under the JSON tool-calling prompt of its template, and
    the (EM, Tool Acc, Value Acc) upstream gives each (the tag line: ledger row 12)."""
    name, params = gold["name"], gold["parameters"]
    plain = json.dumps({"name": name, "parameters": params})
    schema_echo = {k: {"type": "string", "value": v} for k, v in params.items()}
    return [
        (plain, (1.0, 1.0, 1.0)),
        (LLAMA_BOT + plain, (1.0, 1.0, 1.0)),  # the tag survives skip_special_tokens=False
        (json.dumps({"type": "function", "name": name, "parameters": params}), (1.0, 1.0, 1.0)),
        (plain + "; " + json.dumps({"name": "LookupSong", "parameters": {}}), (1.0, 1.0, 1.0)),
        (json.dumps({"name": name, "parameters": schema_echo}), (0.0, 1.0, 0.0)),
        # A non-string name anywhere in the reply: upstream keeps no call at all.
        (plain + "; " + json.dumps({"name": None, "parameters": {}}), (0.0, 0.0, 0.0)),
        (json.dumps({"name": [name], "parameters": params}), (0.0, 0.0, 0.0)),
        (json.dumps({"name": {"name": name}, "parameters": params}), (0.0, 0.0, 0.0)),
        (json.dumps({"name": 0, "parameters": {}}) + "; " + plain, (0.0, 0.0, 0.0)),
        (json.dumps({"name": True, "parameters": params}), (0.0, 0.0, 0.0)),
    ]


@needs_data
def test_real_style_llama_replies_are_scored_as_upstream(tmp_path):
    from pytest_toolbench.config import RunSettings
    from pytest_toolbench.models.factory import build_model

    cases = golden_cases(10)
    plan = [llama_replies(case.sample.golden_calls[0])[i] for i, case in enumerate(cases)]
    replies = [(200, {}, completion(text)) for text, _ in plan]
    with FakeOpenAIServer(scripted(*replies)) as server:
        settings = RunSettings(model="llama3.1-instruct", backend="vllm", cache_dir=tmp_path / "cache")
        model = build_model(settings, server=ServerInfo(base_url=server.base_url, served_model="served",
                                                        identity={"family": "llama3.1"}))
        results = run_all(make_runner(tmp_path, "vllm"), cases, model)
    assert len(server.requests) == len(cases)
    for sent in server.requests:  # upstream's SamplingParams for a local model
        assert sent["skip_special_tokens"] is False and sent["repetition_penalty"] == 1.05
        assert (sent["temperature"], sent["top_p"], sent["max_tokens"]) == (0.5, 0.9, 512)
    for (text, expected), result in zip(plan, results, strict=True):
        assert result.details["text_parser"] == "llama3_json" and result.details["raw_output"] == text
        assert scores(result) == expected, text
        if expected == (0.0, 0.0, 0.0):
            assert result.details["predicted_calls"] == [], text


# --- API replies that stop upstream's evaluation (ledger rows 19, 20) ---------------------------------
@needs_data
def test_gpt4o_content_null_beside_tool_calls_is_scored(tmp_path):
    """OpenAI sends ``content: null`` with tool calls; upstream's ``len(result["content"])`` raises
    TypeError and the run stops (ledger row 19). Here the calls are scored, and a null content with
    no calls is a reply with no calls."""
    cases = golden_cases(4)
    golds = [case.sample.golden_calls[0] for case in cases]
    bodies = [
        completion(None, [tool_call(golds[0]["name"], golds[0]["parameters"])]),
        completion(None, [tool_call("LookupSong", {}), tool_call(golds[1]["name"], golds[1]["parameters"])]),
        completion(None, [tool_call(golds[2]["name"], {})]),
        completion(None),
    ]
    with FakeOpenAIServer(scripted(*[(200, {}, body) for body in bodies])) as server:
        model = OpenAIBackend(BackendSpec(model="gpt-4o", base_url=server.base_url, api_key="unused", max_retries=0))
        results = run_all(make_runner(tmp_path, "openai"), cases, model)
    assert all(sent.get("tools") and "skip_special_tokens" not in sent for sent in server.requests)
    assert all(result.details["tool_format"] == "openai" and not result.is_error for result in results)
    assert [r.details["raw_output"] for r in results] == [None] * 4
    assert [scores(r) for r in results] == [(1.0, 1.0, 1.0), (1.0, 1.0, 1.0), (0.0, 1.0, 0.0), (0.0, 0.0, 0.0)]


@needs_data
def test_deepseek_reasoner_non_object_items_are_dropped(tmp_path):
    """``DeepSeek_R1.get_tool_call`` filters with ``"name" in t``: a number, a boolean or null (as
    the whole content or an item of its list) raises TypeError and the run stops, and so does a
    null content (``json.loads(None)``) (ledger row 20). Here such items are dropped, the rest
    scored; a string or list item passes upstream's filter and its metric drops it, as here."""
    cases = golden_cases(8)
    golds = [{"name": c.sample.golden_calls[0]["name"], "parameters": c.sample.golden_calls[0]["parameters"]}
             for c in cases]
    contents = [
        json.dumps([golds[0], 5, None]),
        json.dumps([True, golds[1]]),
        json.dumps([1.5]),
        "null",
        "5",
        None,
        json.dumps(["name and parameters", ["name", "parameters"], golds[6]]),
        repr([golds[7], None]),  # a Python literal: ast.literal_eval reads it
    ]
    bodies = [completion(content) for content in contents]
    for body in bodies:
        body["choices"][0]["message"]["reasoning_content"] = "thinking"
    with FakeOpenAIServer(scripted(*[(200, {}, body) for body in bodies])) as server:
        model = OpenAIBackend(BackendSpec(model="deepseek-reasoner", base_url=server.base_url, api_key="unused", max_retries=0))
        results = run_all(make_runner(tmp_path, "openai"), cases, model)
    assert all("tools" not in sent and "skip_special_tokens" not in sent for sent in server.requests)
    assert all(r.details["tool_format"] == "deepseek_r1" and not r.is_error for r in results)
    assert [scores(r)[0] for r in results] == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    assert [len(r.details["predicted_calls"]) for r in results] == [1, 1, 0, 0, 0, 0, 1, 1]
