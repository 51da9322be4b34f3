"""Upstream scorer (ToolHop ``code/evaluation_*.py``) hand-checked on real records, plus the labelled strict scorer.

Each expected value below was worked out by hand from the rule
``gold.rstrip('.0').lower() in pred.rstrip('.0').replace(',', '').lower()`` (or in the last tool
message), not by running the code under test.
"""

from __future__ import annotations


import pytest

from pytest_toolbench.benchmarks.toolhop.oracle import toolhop_oracle
from pytest_toolbench.benchmarks.toolhop.prompts import SCENARIOS, build_messages, build_tools
from pytest_toolbench.benchmarks.toolhop.schema import ToolHopRecord
from pytest_toolbench.benchmarks.toolhop.scoring import (
    extract_answer_tag,
    normalize_strict,
    strict_answer_correct,
    upstream_answer_correct,
)
from pytest_toolbench.models.base import ChatRequest


def convo(record: ToolHopRecord, final: str | None, tool_results: tuple[str, ...] = ()) -> list[dict]:
    """user prompt, [assistant tool calls + tool results], final assistant message."""
    messages = build_messages("mandatory", record.question)
    if tool_results:
        calls = [
            {"id": f"c{i}", "type": "function", "function": {"name": "t", "arguments": "{}"}}
            for i in range(len(tool_results))
        ]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        for i, content in enumerate(tool_results):
            messages.append({"role": "tool", "content": content, "tool_call_id": f"c{i}"})
    if final is not None:
        messages.append({"role": "assistant", "content": final})
    return messages


@pytest.mark.parametrize(
    "record_id, prediction, expected",
    [
        # 515: gold "360" -> rstrip('.0') -> "36", so a wrong "36" and a wrong "365" both pass.
        (515, "<answer>360</answer>", True),
        (515, "<answer>36</answer>", True),
        (515, "<answer>365</answer>", True),
        (515, "<answer>63</answer>", False),
        # 204: gold "110" -> "11".
        (204, "<answer>11</answer>", True),
        (204, "<answer>10</answer>", False),
        # 365: gold "1100110" -> "110011" (a different binary string passes).
        (365, "<answer>1100111</answer>", True),
        (365, "<answer>1100100</answer>", False),
        # 492: gold "324.0" -> "324".
        (492, "<answer>324</answer>", True),
        (492, "The square is 324.", True),
        # 972: gold "6.0" -> "6": any 6 anywhere.
        (972, "<answer>16</answer>", True),
        # 124: gold "0" -> "" which is in every non-empty string.
        (124, "<answer>I don't know</answer>", True),
        (124, "no", True),
        # 23: gold "9098"; commas are removed from the prediction only.
        (23, "<answer>9,098</answer>", True),
        (23, "<answer>9.098</answer>", False),
        (23, "<answer>9 098</answer>", False),
        # 190: case-insensitive substring over the whole message, no tag extraction.
        (190, "<answer>o'sullivan</answer>", True),
        (190, "Her last name is O'SULLIVAN, I think.", True),
        (190, "<answer>Sullivan</answer>", False),
        # 436: gold "3", no word boundaries.
        (436, "<answer>2023</answer>", True),
        (436, "<answer>two</answer>", False),
        # 645: date gold, no date normalisation.
        (645, "<answer>1992-09-06</answer>", True),
        (645, "<answer>6 September 1992</answer>", False),
    ],
)
def test_upstream_scorer_hand_computed(real, record_id, prediction, expected):
    record = real[record_id]
    assert upstream_answer_correct(convo(record, prediction), record.answer) is expected


def test_tool_fallback_uses_the_last_tool_message(real):
    record = real[492]  # gold "324.0"; tool results are json.dumps-ed
    wrong = "<answer>I could not compute it</answer>"
    assert upstream_answer_correct(convo(record, wrong, ('"18"', "324.0")), record.answer) is True
    # Only messages[-2]: an earlier tool message of the batch does not count.
    assert upstream_answer_correct(convo(record, wrong, ("324.0", '"18"')), record.answer) is False
    # Commas are removed from the tool text too (it goes through the same norm).
    record23 = real[23]
    assert upstream_answer_correct(convo(record23, "<answer>?</answer>", ("9,098",)), "9098") is True


def test_direct_has_no_fallback_even_if_the_prompt_contains_the_gold(real):
    record = real[747]  # gold "Russell" appears in the question itself
    messages = build_messages("direct", record.question)
    assert "russell" in messages[0]["content"].lower()
    messages.append({"role": "assistant", "content": "<answer>Smith</answer>"})
    assert upstream_answer_correct(messages, record.answer) is False


def test_no_answer_cases(real):
    record = real[124]  # even the gold "0", which matches anything, needs a final answer
    ends_on_tool = convo(record, None, ('"0"',))
    assert ends_on_tool[-1]["role"] == "tool"
    assert upstream_answer_correct(ends_on_tool, record.answer) is None
    assert upstream_answer_correct(convo(record, ""), record.answer) is None
    none_content = convo(record, None) + [{"role": "assistant", "content": None}]
    assert upstream_answer_correct(none_content, record.answer) is None
    assert strict_answer_correct(ends_on_tool, record.answer) is None


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_oracle_scores_every_real_record(real, scenario):
    """With tools the oracle first calls one gold tool per hop (whatever they return), then
    answers; in direct it answers at once. Either way the upstream scorer counts it right."""
    for record in real.values():
        messages = build_messages(scenario, record.question)
        oracle = toolhop_oracle(record)
        for _ in range(record.hops + 1):
            reply = oracle(ChatRequest(messages=messages, tools=build_tools(record, scenario)))
            messages.append(reply)
            calls = reply.get("tool_calls") or []
            if not calls:
                break
            messages += [{"role": "tool", "content": '"stub"', "tool_call_id": c["id"]} for c in calls]
        called = [c["function"]["name"] for m in messages for c in m.get("tool_calls") or []]
        assert called == ([] if scenario == "direct" else record.tool_names), record.id
        assert upstream_answer_correct(messages, record.answer) is True, record.id
        assert strict_answer_correct(messages, record.answer) is True, record.id


# --------------------------------------------------------------------------- strict (NOT upstream)


def test_strict_scorer_extracts_the_last_tag_and_matches_exactly(real):
    record = real[515]  # gold "360"
    ok = "I think <answer>36</answer>... no, <answer> 360. </answer>"
    assert strict_answer_correct(convo(record, ok), record.answer) is True
    assert strict_answer_correct(convo(record, "<answer>36</answer>"), record.answer) is False
    assert strict_answer_correct(convo(record, "360"), record.answer) is False  # no tag
    assert upstream_answer_correct(convo(record, "<answer>36</answer>"), record.answer) is True
    record0 = real[124]
    assert strict_answer_correct(convo(record0, "<answer>1</answer>"), record0.answer) is False


def test_strict_normalisation():
    assert normalize_strict("  Maureen   O'Sullivan. ") == "maureen o'sullivan"
    assert extract_answer_tag("<answer>a</answer> x <ANSWER>b\nc</ANSWER>") == "b\nc"
    assert extract_answer_tag("no tag") is None
