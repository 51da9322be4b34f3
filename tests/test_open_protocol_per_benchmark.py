"""One open-protocol parser per benchmark, chosen by the call's ``CallContext.benchmark``.

Two benchmarks with parsers of their own share one model: each call's raw text is read by its
own benchmark's parser, with its own plan (series, stop ids), whatever its case id says; a call
naming no benchmark gets the named default (ToolHop's declaration); a benchmark the run did not
declare gets its raw text. The bundled benchmarks' requests and cache keys are those of the base
plan (tests/test_open_protocol.py covers them end to end over HTTP).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pytest_toolbench.benchmarks import registry
from pytest_toolbench.benchmarks.base import OPEN_PROTOCOL_DEFAULT_BENCHMARK, run_open_protocols
from pytest_toolbench.benchmarks.toolhop.open_parsers import TOOLHOP_OPEN_PARSER
from pytest_toolbench.models.base import CallContext, ChatRequest, ChatResponse
from pytest_toolbench.models.cache import cache_key
from pytest_toolbench.models.open_protocol import OpenProtocolModel, plan_open_protocol

QWEN = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
BRACKET = 'Calling. [[f {"a": 2}]]'
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {}}}]


class BracketParser:
    """Another upstream's format: ``[[name {json}]]``; its own stop ids."""

    def __init__(self, stop: tuple[int, ...] | None = (7, 8)):
        self.stop = stop

    def series_for(self, family: str) -> str | None:
        return "bracket"

    def stop_token_ids(self, family: str, series: str) -> tuple[int, ...] | None:
        return self.stop

    def parse(self, series: str, text: str, call_seed: str) -> dict[str, Any]:
        head, _, rest = text.partition("[[")
        if not rest:
            return {"role": "assistant", "content": text, "tool_calls": None}
        name, _, args = rest.removesuffix("]]").partition(" ")
        call = {"id": f"br_{call_seed}", "type": "function", "function": {"name": name, "arguments": args}}
        return {"role": "assistant", "content": head.strip(), "tool_calls": [call]}


class Bench:
    def __init__(self, name: str, protocol: str | None, parser: Any = None):
        self.name = name
        if protocol is not None:
            self.open_protocol = protocol
        if parser is not None:
            self.open_parser = parser


class Endpoint:
    """The cached endpoint below the wrapper: replies with the text scripted per benchmark and
    keeps each request it was sent with its cache key (base plan in the key, as the factory)."""

    name = "m"

    def __init__(self, key_extra: dict[str, Any]):
        self.key_extra = key_extra
        self.sent: list[tuple[ChatRequest, str]] = []

    async def complete(self, request: ChatRequest, ctx: CallContext) -> ChatResponse:
        self.sent.append((request, cache_key(self.name, None, request, self.key_extra)))
        text = BRACKET if ctx.case_id.startswith("bracket-says") else QWEN
        return ChatResponse(message={"role": "assistant", "content": text})

    def describe(self) -> dict[str, Any]:
        return {"backend": "test"}

    async def aclose(self) -> None:
        pass


def make_model(benchmarks: dict[str, Any], backend: str = "vllm") -> tuple[OpenProtocolModel, Endpoint]:
    protocols = run_open_protocols(benchmarks)
    plan = plan_open_protocol("Qwen2.5-7B-Instruct", backend, {"family": "qwen2.5"}, protocols.parser)
    inner = Endpoint({"open_protocol": plan.describe()})
    return OpenProtocolModel(inner, plan, protocols), inner  # type: ignore[arg-type]


def ask(model: OpenProtocolModel, case_id: str, benchmark: str | None, tools=TOOLS) -> dict[str, Any]:
    request = ChatRequest(messages=[{"role": "user", "content": "q"}], tools=tools)
    return asyncio.run(model.complete(request, CallContext(case_id=case_id, benchmark=benchmark))).message


def two_parsers(parser: Any = None) -> dict[str, Any]:
    return {"toolhop": registry()["toolhop"], "bracket": Bench("bracket", "parsed", parser or BracketParser()),
            "plain": Bench("plain", None)}


def test_each_benchmark_is_read_by_its_own_parser_whatever_its_case_id_says() -> None:
    model, inner = make_model(two_parsers())
    # A ToolHop call whose case id starts like the other benchmark's, and the reverse.
    toolhop = ask(model, "bracket-looks-like-toolhop", "toolhop")
    bracket = ask(model, "bracket-says", "bracket")
    assert [c["function"]["name"] for c in toolhop["tool_calls"]] == ["f"]  # parse_qwen25
    assert toolhop["tool_calls"][0]["id"].startswith("call_")
    assert bracket["tool_calls"][0]["id"] == "br_bracket-says|0" and bracket["content"] == "Calling."
    # ToolHop's parser on the bracket text would find no call, and the reverse.
    assert TOOLHOP_OPEN_PARSER.parse("qwen25", BRACKET, "s")["tool_calls"] is None
    assert BracketParser().parse("bracket", QWEN, "s")["tool_calls"] is None
    assert all(r.tool_choice == "none" for r, _ in inner.sent)


def test_no_benchmark_gets_the_named_default_and_an_undeclared_one_its_raw_text() -> None:
    assert OPEN_PROTOCOL_DEFAULT_BENCHMARK == "toolhop"
    model, _ = make_model(two_parsers())
    unnamed = ask(model, "bracket-says", None)  # library use: ToolHop's protocol, not the id's
    assert unnamed["content"] == "Calling. [[f {\"a\": 2}]]" and unnamed["tool_calls"] is None
    assert ask(model, "x-1", None)["tool_calls"][0]["id"].startswith("call_")
    raw = ask(model, "x-1", "nobody-declared-this")
    assert raw["content"] == QWEN and not raw.get("tool_calls")
    plain = ask(model, "plain-1", "plain")  # declared nothing: its raw text
    assert plain["content"] == QWEN and not plain.get("tool_calls")


def test_each_parser_has_its_own_plan_and_the_base_plan_keeps_its_keys() -> None:
    alone, alone_inner = make_model({"toolhop": registry()["toolhop"]})
    model, inner = make_model(two_parsers())
    ask(alone, "toolhop-1", "toolhop")
    ask(model, "toolhop-1", "toolhop")
    ask(model, "bracket-says", "bracket")
    (toolhop_request, toolhop_key), (bracket_request, bracket_key) = inner.sent
    # ToolHop: the base plan (its stop ids sent by the backend), request and key as without others.
    assert toolhop_request.extra_body is None and toolhop_key == alone_inner.sent[0][1]
    assert model.plan.extra_body == {"stop_token_ids": [151645, 151643]}
    # The other parser's stop ids go in its own request, so they key its cache entries too.
    assert bracket_request.extra_body == {"stop_token_ids": [7, 8]} and bracket_key != toolhop_key
    described = model.describe()
    assert described["open_parser"] == "qwen25" and described["stop_token_ids"] == [151645, 151643]
    assert described["open_plans"] == {"bracket": {"protocol": "upstream-open", "family": "qwen2.5",
                                                   "open_parser": "bracket", "stop_token_ids": [7, 8]}}
    assert "open_plans" not in alone.describe()


def test_a_parser_without_stop_ids_sends_none_on_vllm_and_nothing_elsewhere() -> None:
    model, inner = make_model(two_parsers(BracketParser(stop=None)))
    ask(model, "bracket-says", "bracket", tools=None)
    assert inner.sent[-1][0].extra_body == {"stop_token_ids": []}  # not ToolHop's, which the backend sends
    model, inner = make_model(two_parsers(BracketParser(stop=None)), backend="openai")
    ask(model, "bracket-says", "bracket")
    assert inner.sent[-1][0].extra_body is None  # no vLLM: no stop ids at all


def test_declarations_are_checked() -> None:
    with pytest.raises(ValueError, match="needs an open_parser"):
        run_open_protocols({"x": Bench("x", "parsed")})
    with pytest.raises(ValueError, match="is not one of"):
        run_open_protocols({"x": Bench("x", "json")})
    protocols = run_open_protocols(two_parsers())
    assert protocols.by_benchmark == {"toolhop": "parsed", "bracket": "parsed", "plain": "text"}
    assert protocols.default.parser is TOOLHOP_OPEN_PARSER and protocols.parser is TOOLHOP_OPEN_PARSER
    # Without ToolHop registered, an unnamed call is ``parsed`` with no parser: the server's.
    assert run_open_protocols({"plain": Bench("plain", None)}).default.parser is None

