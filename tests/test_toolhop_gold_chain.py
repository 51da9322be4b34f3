"""The oracle's gold tool chain: where each hop's arguments come from (ToolHop has no gold
arguments in upstream data/ToolHop.json), and that every call is schema-valid."""

from __future__ import annotations

import json

import pytest

from pytest_toolbench.benchmarks.toolhop.gold_chain import (
    derived_arguments,
    example_arguments,
    gold_chain,
    reached_gold,
    signature_required,
)
from pytest_toolbench.benchmarks.toolhop.invocation_errors import ToolCallRecord, summarize
from pytest_toolbench.benchmarks.toolhop.oracle import toolhop_oracle
from pytest_toolbench.benchmarks.toolhop.prompts import build_tools
from pytest_toolbench.benchmarks.toolhop.schema import ToolHopRecord
from pytest_toolbench.models.base import ChatRequest
from shared_data import BUNDLED_TOOLHOP

BUNDLED = {r["id"]: ToolHopRecord.model_validate(r)
           for r in json.loads(BUNDLED_TOOLHOP.read_text())}

SOURCE = """def film_release_year_finder(actors, genre, director=None):
    return 2011

# Example usage:
# film_release_year_finder(['Jewel Staite', 'Alan Dale'], 'sci-fi') should return 2011
"""


def test_a_commented_example_call_maps_positional_arguments_to_parameter_names() -> None:
    assert example_arguments(SOURCE, "film_release_year_finder") == {
        "actors": ["Jewel Staite", "Alan Dale"], "genre": "sci-fi"}


def test_a_live_example_with_keywords_and_a_non_literal_one() -> None:
    live = "def f(a, b=1):\n    return a\n\nresult = f('x', b=2)\nprint(result)\n"
    assert example_arguments(live, "f") == {"a": "x", "b": 2}
    assert example_arguments("def f(a):\n    return a\n\nprint(f(some_variable))\n", "f") is None
    assert example_arguments("def f(a):\n    return f('inside the body')\n", "f") is None


def test_derived_arguments_take_numbers_enums_and_the_previous_gold_answer() -> None:
    params = {"type": "object", "required": ["a", "b", "operation"], "properties": {
        "a": {"type": "number"}, "b": {"type": "number"},
        "operation": {"type": "string", "enum": ["add", "multiply"]}}}
    args, placeholders = derived_arguments(params, "What is 26 multiplied by 10?", "26")
    assert args == {"a": 26, "b": 10, "operation": "add"} and placeholders == ("operation",)
    names = {"type": "object", "required": ["full_name"],
             "properties": {"full_name": {"type": ["string", "array"]}}}
    assert derived_arguments(names, "First name of Steven Spielberg?", "Steven Spielberg") == (
        {"full_name": "Steven Spielberg"}, ())
    listed = {"type": "object", "required": ["words"],
              "properties": {"words": {"type": "array", "items": {"type": "string"}}}}
    assert derived_arguments(listed, "q", "Madrid")[0] == {"words": ["Madrid"]}


def test_the_signature_s_required_parameters_are_filled_when_the_schema_declares_them() -> None:
    source = "def g(x, mode, *, flag, level=2):\n    return x\n"
    assert signature_required(source, "g") == ["x", "mode", "flag"]
    params = {"type": "object", "required": ["x"], "properties": {
        "x": {"type": "string"}, "mode": {"type": "string"}, "level": {"type": "integer"}}}
    args, _ = derived_arguments(params, "q", "v", signature_required(source, "g"))
    assert args == {"x": "v", "mode": "v"}  # "flag" is not in the schema: never sent


@pytest.mark.parametrize("record_id", sorted(BUNDLED))
def test_every_gold_call_is_schema_valid_and_in_hop_order(record_id: int) -> None:
    record = BUNDLED[record_id]
    chain = gold_chain(record)
    assert [c.name for c in chain] == record.tool_names
    assert [c.gold for c in chain] == list(record.sub_task.values())
    for call in chain:
        doc = list(record.tools.values())[call.hop]["parameters"]
        assert set(call.arguments) <= set(doc["properties"])
        assert set(doc.get("required", [])) <= set(call.arguments)


def test_the_oracle_calls_one_hop_per_turn_then_answers() -> None:
    record = BUNDLED[9001]
    oracle = toolhop_oracle(record)
    messages: list[dict] = [{"role": "user", "content": "q"}]
    replies = []
    for _ in range(record.hops + 1):
        reply = oracle(ChatRequest(messages=messages, tools=build_tools(record, "mandatory")))
        replies.append(reply)
        messages.append(reply)
        for call in reply.get("tool_calls") or []:
            messages.append({"role": "tool", "content": '"x"', "tool_call_id": call["id"]})
    first = replies[0]["tool_calls"][0]["function"]
    assert first == {"name": "film_director_finder", "arguments": '{"film_title": "Jaws"}'}
    assert replies[-1] == {"role": "assistant", "content": f"<answer>{record.answer}</answer>"}
    direct = oracle(ChatRequest(messages=messages[:1], tools=build_tools(record, "direct")))
    assert direct == {"role": "assistant", "content": f"<answer>{record.answer}</answer>"}


def test_the_chain_report_says_what_the_tools_really_returned() -> None:
    record = BUNDLED[9001]
    oracle = toolhop_oracle(record)
    calls = [ToolCallRecord(turn=i, index=0, name=c.name, arguments=json.dumps(c.arguments),
                            feedback=fb, raised=fb.startswith("an error"))
             for i, (c, fb) in enumerate(zip(oracle.chain, ['"Steven Spielberg"', '"Stephen"',
                                                             "an error occured when call x: boom"]))]
    report = oracle.chain_report(calls)
    assert [h["reached_gold"] for h in report["hops"]] == [True, False, False]
    assert (report["calls"], report["raised"], report["reached_gold"]) == (3, 1, 1)
    assert summarize(record, calls)["error_calls"] == 0  # schema-valid, whatever came back


def test_reached_gold_uses_the_upstream_substring_test() -> None:
    assert reached_gold('"Steven Spielberg"', "steven spielberg")
    assert reached_gold("1,889", "1889") and not reached_gold('"1888"', "1889")


def test_the_gold_chain_is_built_only_when_the_oracle_is_asked_for_a_tool_call(monkeypatch) -> None:
    """The runner makes an oracle for every case, whatever the model: building the chain parses
    every hop's source, so it must wait until the oracle answers a request with tools, and then
    happen once for the case however many turns follow."""
    from pytest_toolbench.benchmarks.toolhop import oracle as oracle_module

    built: list[int] = []
    real = oracle_module.gold_chain
    monkeypatch.setattr(oracle_module, "gold_chain", lambda r: built.append(r.id) or real(r))
    record = BUNDLED[9001]
    oracle = toolhop_oracle(record)
    oracle(ChatRequest(messages=[{"role": "user", "content": "q"}], tools=build_tools(record, "direct")))
    assert built == []  # a direct answer needs no chain
    messages: list[dict] = [{"role": "user", "content": "q"}]
    for _ in range(2):
        reply = oracle(ChatRequest(messages=messages, tools=build_tools(record, "mandatory")))
        messages += [reply, {"role": "tool", "content": '"x"', "tool_call_id": reply["tool_calls"][0]["id"]}]
    assert built == [9001]
