"""detect_parse_failure on realistic replies from common tool-call formats."""

from __future__ import annotations

import pytest

from pytest_toolbench.models.parse_check import detect_parse_failure


def text(content):
    return {"role": "assistant", "content": content}


def calls(*arguments, name="get_capital"):
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": a}}
            for i, a in enumerate(arguments)
        ],
    }


UNEXTRACTED = {
    "hermes_qwen": '<tool_call>\n{"name": "get_capital", "arguments": {"country": "France"}}\n'
                   "</tool_call>",
    "hermes_with_preamble": "Let me look that up.\n<tool_call>\n{\"name\": \"get_capital\", "
                            '"arguments": {"country": "France"}}\n</tool_call>',
    "llama31_python_tag": '<|python_tag|>{"name": "get_capital", "parameters": {"country": "France"}}',
    "llama31_bare_json": '{"name": "get_capital", "parameters": {"country": "France"}}',
    "llama31_typed_json": '{"type": "function", "name": "get_capital", '
                          '"parameters": {"country": "France"}}',
    "llama_function_tag": '<function=get_capital>{"country": "France"}</function>',
    "mistral_marker": '[TOOL_CALLS] [{"name": "get_capital", "arguments": {"country": "France"}}]',
    "mistral_marker_stripped": '[{"name": "get_capital", "arguments": {"country": "France"}}]',
    "json_fence": 'I will call the tool:\n```json\n{"name": "get_capital", '
                  '"arguments": {"country": "France"}}\n```',
    "truncated_hermes": '<tool_call>\n{"name": "get_capital", "arguments": {"coun',
}


@pytest.mark.parametrize("content", UNEXTRACTED.values(), ids=UNEXTRACTED.keys())
def test_unextracted_tool_calls_are_flagged(content):
    failure = detect_parse_failure(text(content))
    assert failure is not None
    assert failure.reason == "unextracted_tool_call"
    assert failure.raw_text == content
    assert failure.detail


FINE = {
    "prose_answer": "The capital of France is Paris.",
    "prose_naming_the_tool": "I would use get_capital with the country France, but I already "
                             "know the answer: Paris.",
    "json_answer_without_arguments": 'Answer: {"name": "Paris", "country": "France"}',
    "unbalanced_brace_prose": "The set {a, b is incomplete; name: x, arguments: y",
    "empty": "",
    "none": None,
    "code_block_not_a_call": "```python\nprint({'name': 1})\n```",
}


@pytest.mark.parametrize("content", FINE.values(), ids=FINE.keys())
def test_plain_replies_are_not_flagged(content):
    assert detect_parse_failure(text(content)) is None


def test_valid_tool_calls_are_not_flagged():
    assert detect_parse_failure(calls('{"country": "France"}', "{}")) is None


@pytest.mark.parametrize(
    "arguments,detail",
    [
        ('{"country": "France"', "not valid JSON"),  # truncated by max_tokens
        ("{'country': 'France'}", "not valid JSON"),  # Python repr, not JSON
        ('["France"]', "not an object"),
        ('"France"', "not an object"),
        ("", "not valid JSON"),
    ],
)
def test_invalid_arguments_json(arguments, detail):
    failure = detect_parse_failure(calls('{"ok": 1}', arguments))
    assert failure is not None and failure.reason == "invalid_arguments_json"
    assert failure.raw_text == arguments
    assert detail in failure.detail and "tool_calls[1]" in failure.detail


def test_arguments_json_refuses_to_decode_are_flagged_not_a_bad_reply():
    """A 5,000-digit number is valid JSON that ``json.loads`` refuses (ValueError, not a
    JSONDecodeError): it escaped, and the reply was retried as a malformed one (bad_response)."""
    arguments = '{"film_title": ' + "9" * 5000 + "}"
    failure = detect_parse_failure(calls(arguments))
    assert failure is not None and failure.reason == "invalid_arguments_json"
    assert "tool_calls[0] ('get_capital'): arguments cannot be decoded (Exceeds the limit" in failure.detail


def test_non_string_arguments_are_flagged():
    failure = detect_parse_failure(calls({"country": "France"}))
    assert failure is not None and failure.reason == "invalid_arguments_json"
    assert "not a JSON string" in failure.detail


def test_content_beside_parsed_tool_calls_is_not_rechecked():
    message = calls('{"country": "France"}')
    message["content"] = "<tool_call>"  # the server parsed the call; leftovers are not our concern
    assert detect_parse_failure(message) is None


def test_list_content_parts_are_read():
    message = text([{"type": "text", "text": '<tool_call>{"name": "f", "arguments": {}}'}])
    assert detect_parse_failure(message).reason == "unextracted_tool_call"
