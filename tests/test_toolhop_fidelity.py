"""ToolHop fidelity leftovers over real HTTP (ToolHop ``code/evaluation_closed.py``): ``"tools": null`` in Direct, the assistant
message kept as returned, too-deep arguments as wrong calls, expression tool names recorded."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import io
import json
import warnings

import pytest

from fake_openai_server import FakeOpenAIServer, completion, scripted, tool_call
from test_toolhop_runner import FakeOutcome, ScriptedModel, calls_msg
from test_toolhop_runner import tool_call as scripted_call
from pytest_toolbench.benchmarks.dataset_errors import DatasetWarning
from pytest_toolbench.benchmarks.toolhop import execution
from pytest_toolbench.benchmarks.toolhop.benchmark import TOOLHOP
from pytest_toolbench.benchmarks.toolhop.decoding import toolhop_sampling
from pytest_toolbench.benchmarks.toolhop.options import ToolHopOptions
from pytest_toolbench.benchmarks.toolhop.runner import ToolHopRunner, is_name_expression
from pytest_toolbench.benchmarks.toolhop.schema import load_toolhop_file
from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.factory import build_model
from pytest_toolbench.results.case_result import Outcome
from shared_data import BUNDLED_TOOLHOP as BUNDLED


@pytest.fixture(scope="module")
def records():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        return {r.id: r for r in load_toolhop_file(BUNDLED)}


class InProcessSandbox:
    """The real upstream-semantics executor (``execution.call_tool``), run in this process."""

    def __init__(self):
        self.payloads: list[dict] = []

    async def arun(self, job: str, payload: dict, timeout_s: float) -> FakeOutcome:
        self.payloads.append(payload)
        with contextlib.redirect_stdout(io.StringIO()):
            return FakeOutcome(status="ok", value=execution.call_tool(payload))


def closed_run(server: FakeOpenAIServer, record, scenario: str, sandbox=None):
    settings = RunSettings(model="gpt-4o", base_url=server.base_url, api_key="sk-test",
                           use_cache=False, max_retries=0)
    assert settings.resolved_decoding == "closed" and not settings.open_protocol
    model = build_model(settings)
    runner = ToolHopRunner(sandbox or InProcessSandbox(), ToolHopOptions(), toolhop_sampling(settings))

    async def go():
        try:
            return await runner.run(TOOLHOP.make_case(record, scenario), model)
        finally:
            await model.aclose()

    return asyncio.run(go())


def with_message(message: dict) -> dict:
    body = completion("x")
    body["choices"][0]["message"] = message
    return body


# ----------------------------------------------------------------------------- tools: null


def test_direct_request_body_has_tools_null(records):
    with FakeOpenAIServer(scripted((200, {}, completion("<answer>6</answer>")))) as server:
        result = closed_run(server, records[9001], "direct")
    body = server.requests[0]
    assert "tools" in body and body["tools"] is None  # a real JSON null, as upstream
    assert "tool_choice" not in body
    assert body["max_tokens"] == 256 and body["temperature"] == 0.0
    assert result.outcome is Outcome.PASSED


def test_mandatory_request_body_has_the_tools_and_no_tool_choice(records):
    with FakeOpenAIServer(scripted((200, {}, completion("<answer>6</answer>")))) as server:
        closed_run(server, records[9001], "mandatory")
    body = server.requests[0]
    assert [t["function"]["name"] for t in body["tools"]] == records[9001].tool_names
    assert "tool_choice" not in body


# ----------------------------------------------------------------------- message passthrough


def test_assistant_message_is_appended_as_returned(records):
    first = {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "reasoning_content": "The director of Jaws is needed first.",
        "annotations": [],
        "tool_calls": [{**tool_call("film_director_finder", {"film_title": "Jaws"}, call_id="c1"),
                        "index": 0}],
    }
    last = {"role": "assistant", "content": "<answer>6</answer>", "refusal": None,
            "reasoning_content": None, "tool_calls": []}
    with FakeOpenAIServer(scripted((200, {}, with_message(first)), (200, {}, with_message(last)))) as server:
        result = closed_run(server, records[9001], "mandatory")
    assert result.transcript[1] == first  # every key, nulls and extras included
    assert result.transcript[3] == last
    assert server.requests[1]["messages"][1] == first  # and sent back as such
    assert result.transcript[2]["tool_call_id"] == "c1"
    assert result.outcome is Outcome.PASSED and result.model_calls == 2


def test_a_message_without_content_is_sent_back_without_it(records):
    """Beside ``tool_calls`` a server may leave ``content`` out; upstream appends the message as it
    came, so the next request has no ``content`` key there (found by
    tests/upstream_diff/toolhop_closed_runs.py: the harness sent ``"content": null``)."""
    first = {"role": "assistant", "tool_calls": [tool_call("film_director_finder", {"film_title": "Jaws"},
                                                           call_id="c1")]}
    with FakeOpenAIServer(scripted((200, {}, with_message(first)),
                                   (200, {}, completion("<answer>6</answer>")))) as server:
        result = closed_run(server, records[9001], "mandatory")
    assert server.requests[1]["messages"][1] == first
    assert result.transcript[1] == first
    assert result.outcome is Outcome.PASSED


# ------------------------------------------------------------------------------ deep nesting


def test_too_deep_arguments_are_a_wrong_call_not_an_infrastructure_error(records):
    deep = '{"text": ' + "[" * 5000 + "]" * 5000 + "}"
    reply = completion(None, [tool_call("letter_counter", deep, call_id="d1")])
    with FakeOpenAIServer(scripted((200, {}, reply), (200, {}, completion("<answer>6</answer>")))) as server:
        result = closed_run(server, records[9001], "mandatory")
    assert result.outcome is Outcome.PASSED and result.error is None
    feedback = result.transcript[2]["content"]
    assert feedback.startswith("an error occured when call letter_counter: maximum recursion depth")
    assert result.parse_failures[0]["reason"] == "invalid_arguments_json"
    summary = result.details["invocation_errors"]
    assert summary["counts"]["unparseable_arguments"] == 1 and summary["calls"] == 1
    assert result.values["error_calls"] == 0.0  # unparseable is reported apart, as before
    assert server.requests[1]["messages"][1]["tool_calls"][0]["function"]["arguments"] == deep


# --------------------------------------------------------------------- expression tool names


@pytest.mark.parametrize(
    ("name", "expression"),
    [
        ("letter_counter", False),
        ("print", False),  # resolves to the builtin, as upstream
        ("1 +", False),  # SyntaxError text, as upstream
        ("'abc'", False),  # a literal: evaluated, as upstream
        ("os.system", True),
        ("__import__('os').system('true')", True),
        ("letter_counter()", True),
        ("  json.dumps", True),
    ],
)
def test_is_name_expression(name, expression):
    assert is_name_expression(name) is expression


def test_expression_tool_names_are_recorded_deviations(records):
    batch = calls_msg(
        scripted_call("a", "letter_counter", {"text": "Steven"}),
        scripted_call("b", "__import__('os').system", {"command": "true"}),
    )
    second = calls_msg(scripted_call("c", "os.getcwd", {}))
    model = ScriptedModel([batch, second, {"role": "assistant", "content": "<answer>6</answer>"}])
    sandbox = InProcessSandbox()
    runner = ToolHopRunner(sandbox, ToolHopOptions(), toolhop_sampling(RunSettings()))
    result = asyncio.run(runner.run(TOOLHOP.make_case(records[9001], "mandatory"), model))
    deviations = [d for d in result.details["deviations"] if d["kind"] == "tool_name_expression"]
    assert [(d["turn"], d["call_index"], d["name"]) for d in deviations] == [
        (0, 1, "__import__('os').system"),
        (1, 0, "os.getcwd"),
    ]
    tools = [m["content"] for m in result.transcript if m["role"] == "tool"]
    assert tools == [
        "6",
        "an error occured when call __import__('os').system: name '__import__('os').system' is not defined",
        "an error occured when call os.getcwd: name 'os.getcwd' is not defined",
    ]
    assert result.outcome is Outcome.PASSED


def test_a_case_without_expression_names_records_none(records):
    model = ScriptedModel([calls_msg(scripted_call("a", "nope", {})), {"role": "assistant", "content": "6"}])
    runner = ToolHopRunner(InProcessSandbox(), ToolHopOptions(), toolhop_sampling(RunSettings()))
    result = asyncio.run(runner.run(TOOLHOP.make_case(records[9001], "mandatory"), model))
    assert result.details["deviations"] == []
    assert copy.deepcopy(result.transcript)[2]["content"] == (
        "an error occured when call nope: name 'nope' is not defined"
    )
    json.dumps(result.model_dump(mode="json"))  # the result serialises


def test_parse_check_labels_too_deep_arguments_and_never_raises():
    from pytest_toolbench.models.parse_check import detect_parse_failure

    deep = "[" * 5000 + "]" * 5000
    failure = detect_parse_failure(
        {"role": "assistant", "content": None, "tool_calls": [tool_call("f", deep)]}
    )
    assert failure is not None and failure.reason == "invalid_arguments_json"
    assert "nested too deeply" in failure.detail
    assert detect_parse_failure({"role": "assistant", "content": "x " + deep}) is None


@pytest.mark.parametrize(
    ("kwargs", "decoding", "open_protocol", "max_tokens"),
    [
        ({"model": "gpt-4o", "api_key": "k"}, "closed", False, 256),
        ({"model": "gpt-4o", "api_key": "k", "decoding": "open"}, "open", True, 1024),
        ({"model": "smollm2-135m"}, "open", True, 1024),  # the embedded default: vLLM
        ({"model": "m", "backend": "vllm", "decoding": "open-server-parser"}, "open-server-parser", False, 1024),
        ({"model": "oracle", "decoding": "open"}, "open", False, 1024),
    ],
)
def test_resolved_decoding(kwargs, decoding, open_protocol, max_tokens, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    settings = RunSettings(**kwargs)
    assert settings.resolved_decoding == decoding
    assert settings.open_protocol is open_protocol
    sampling = toolhop_sampling(settings)
    assert sampling.max_tokens == max_tokens and sampling.temperature == 0.0
