"""Upstream's open-model parsers (ToolHop ``code/evaluation_open.py``) on realistic raw Qwen2.5 / Llama-3.1 replies.

Expected messages are written out by hand from upstream's ``parse_qwen25`` / ``parse_llama31``
semantics (json_repair, content rules, first call only for Llama). Call ids are deterministic
here (upstream's clock-based ids are the one documented deviation), so whole messages compare.
"""

from __future__ import annotations

import json
import sys

import pytest

from pytest_toolbench.benchmarks.toolhop.open_parsers import (
    OpenParseError,
    deterministic_ids,
    parse_llama31,
    parse_open_reply,
    parse_qwen25,
)


def ids():
    return deterministic_ids("case|0")


def expected_id(n: int) -> str:
    return deterministic_ids("case|0").__call__() if n == 0 else _nth(n)


def _nth(n: int) -> str:
    gen = deterministic_ids("case|0")
    for _ in range(n):
        gen()
    return gen()


def call(n: int, name: str, arguments: str) -> dict:
    return {"id": _nth(n), "type": "function", "function": {"arguments": arguments, "name": name}}


def msg(content, tool_calls) -> dict:
    return {"role": "assistant", "content": content, "tool_calls": tool_calls}


# ------------------------------------------------------------------------------- Qwen2.5

QWEN_CASES = [
    pytest.param(
        "<answer>1564</answer>",
        msg("<answer>1564</answer>", None),
        id="plain-answer",
    ),
    pytest.param(
        '<tool_call>\n{"name": "book_author_identifier", "arguments": {"title": "Don Quixote"}}\n</tool_call>',
        msg(None, [call(0, "book_author_identifier", '{"title": "Don Quixote"}')]),
        id="one-call-content-none",
    ),
    pytest.param(
        'I will look up the author first.\n<tool_call>\n{"name": "book_author_identifier", '
        '"arguments": {"title": "Don Quixote"}}\n</tool_call>',
        msg("I will look up the author first.", [call(0, "book_author_identifier", '{"title": "Don Quixote"}')]),
        id="text-then-call",
    ),
    pytest.param(
        '<tool_call>\n{"name": "multiply_numbers", "arguments": {"numbers": [6, 3]}}\n</tool_call>\n'
        '<tool_call>\n{"name": "text_letter_count", "arguments": {"text": ["Barcelona", "Kobe"]}}\n</tool_call>\n'
        '<tool_call>\n{"name": "modulo_calculator", "arguments": {"dividend": 18, "divisor": 9}}\n</tool_call>',
        msg(None, [
            call(0, "multiply_numbers", '{"numbers": [6, 3]}'),
            call(1, "text_letter_count", '{"text": ["Barcelona", "Kobe"]}'),
            call(2, "modulo_calculator", '{"dividend": 18, "divisor": 9}'),
        ]),
        id="parallel-calls",
    ),
    pytest.param(
        # trailing comma and a missing closing brace: json_repair fixes both
        '<tool_call>\n{"name": "letter_counter", "arguments": {"text": "Steven",}\n</tool_call>',
        msg(None, [call(0, "letter_counter", '{"text": "Steven"}')]),
        id="json-repair-trailing-comma-missing-brace",
    ),
    pytest.param(
        # single quotes and an unterminated block (generation hit the end)
        "<tool_call>\n{'name': 'country_capital', 'arguments': {'country': 'España'}}",
        msg(None, [call(0, "country_capital", '{"country": "España"}')]),
        id="json-repair-single-quotes-no-end-tag",
    ),
    pytest.param(
        # arguments as a JSON string (OpenAI style): parsed a second time
        '<tool_call>\n{"name": "reverse", "arguments": "{\\"text\\": \\"Madrid\\"}"}\n</tool_call>',
        msg(None, [call(0, "reverse", '{"text": "Madrid"}')]),
        id="string-arguments",
    ),
    pytest.param(
        # first block is not a call (no arguments) -> dropped; second kept
        '<tool_call>\n{"name": "broken"}\n</tool_call>\n<tool_call>\n{"name": "ok", "arguments": {}}\n</tool_call>',
        msg(None, [call(0, "ok", "{}")]),
        id="bad-block-dropped",
    ),
    pytest.param(
        # prose after the last call is an extra "block": json_repair reads it as "" -> dropped
        '<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>\nLet me wait for the result.',
        msg(None, [call(0, "f", '{"x": 1}')]),
        id="trailing-prose-dropped",
    ),
    pytest.param(
        # a newline before the marker: content is "" (not None), as upstream
        '\n<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>',
        msg("", [call(0, "f", '{"x": 1}')]),
        id="leading-newline-empty-content",
    ),
    pytest.param(
        # nothing parses: no calls, content is the text before the marker (None here)
        "<tool_call>\nnot json at all\n</tool_call>",
        msg(None, None),
        id="nothing-parses",
    ),
    pytest.param(
        # name missing but arguments present: the list was created, so tool_calls == []
        '<tool_call>\n{"arguments": {"x": 1}}\n</tool_call>',
        msg(None, []),
        id="missing-name-leaves-empty-list",
    ),
    pytest.param(
        '<tool_call>\n{"name": "f", "arguments": {"city": "Zürich"}}\n</tool_call>',
        msg(None, [call(0, "f", '{"city": "Zürich"}')]),
        id="non-ascii-kept",
    ),
]


@pytest.mark.parametrize(("raw", "expected"), QWEN_CASES)
def test_qwen25(raw: str, expected: dict) -> None:
    assert parse_qwen25(raw, ids()) == expected
    assert parse_open_reply("qwen25", raw, ids()) == expected


def test_qwen25_lstrip_is_a_character_set() -> None:
    # "<tool_call>" lstrip removes any of the characters "<tool_ca>": the JSON starts with "{",
    # so it survives; a bare word right after the marker is eaten ("call" -> "").
    raw = '<tool_call>call{"name": "f", "arguments": {}}</tool_call>'
    assert parse_qwen25(raw, ids()) == msg(None, [call(0, "f", "{}")])


def test_qwen25_deep_nesting_is_dropped_not_raised() -> None:
    raw = '<tool_call>{"name": "f", "arguments": {"x": ' + "[" * 5000 + "]" * 5000 + "}}</tool_call>"
    assert parse_qwen25(raw, ids()) == msg(None, None)


# ------------------------------------------------------------------------------- Llama 3.1

LLAMA_CASES = [
    pytest.param(
        "<answer>Madrid</answer>",
        msg("<answer>Madrid</answer>", None),
        id="plain-answer",
    ),
    pytest.param(
        '{"name": "book_author_identifier", "parameters": {"title": "Don Quixote"}}',
        msg(None, [call(0, "book_author_identifier", '{"title": "Don Quixote"}')]),
        id="bare-json-call",
    ),
    pytest.param(
        # <|python_tag|> survives only without skip_special_tokens; content = text before it
        'Looking it up.<|python_tag|>{"name": "f", "parameters": {"x": 1}}',
        msg("Looking it up.", [call(0, "f", '{"x": 1}')]),
        id="python-tag",
    ),
    pytest.param(
        # two calls in a list: only the first is kept
        '[{"name": "a", "parameters": {"x": 1}}, {"name": "b", "parameters": {"y": 2}}]',
        msg(None, [call(0, "a", '{"x": 1}')]),
        id="first-call-only",
    ),
    pytest.param(
        # json_repair: unquoted trailing comma and a cut-off end
        '{"name": "letter_counter", "parameters": {"text": "Steven",',
        msg(None, [call(0, "letter_counter", '{"text": "Steven"}')]),
        id="json-repair-truncated",
    ),
    pytest.param(
        # prose before JSON: json_repair skips to the object, content stays None
        'Sure! {"name": "f", "parameters": {"x": 1}}',
        msg(None, [call(0, "f", '{"x": 1}')]),
        id="prose-then-json",
    ),
    pytest.param(
        # "arguments" instead of "parameters": not a call; content is the whole text
        '{"name": "f", "arguments": {"x": 1}}',
        msg('{"name": "f", "arguments": {"x": 1}}', None),
        id="arguments-key-not-a-call",
    ),
    pytest.param(
        # parameters as a JSON string: parsed again
        '{"name": "f", "parameters": "{\\"x\\": 1}"}',
        msg(None, [call(0, "f", '{"x": 1}')]),
        id="string-parameters",
    ),
    pytest.param(
        # first element bad (no name, list created), second good -> the second is kept
        '[{"parameters": {"x": 1}}, {"name": "g", "parameters": {}}]',
        msg(None, [call(1, "g", "{}")]),
        id="first-bad-second-kept",
    ),
    pytest.param(
        # only a nameless call: tool_calls stays [] and content is the raw text
        '{"parameters": {"x": 1}}',
        msg('{"parameters": {"x": 1}}', []),
        id="nameless-empty-list",
    ),
]


@pytest.mark.parametrize(("raw", "expected"), LLAMA_CASES)
def test_llama31(raw: str, expected: dict) -> None:
    assert parse_llama31(raw, ids()) == expected
    assert parse_open_reply("llama31", raw, ids()) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "[" * 5000,  # json_repair hits the recursion limit: upstream's call fails
        'Calling.<|python_tag|>{"name": "f", "parameters": ' + "[" * 5000 + "}",
    ],
)
def test_llama31_parser_failure_is_an_open_parse_error(raw: str) -> None:
    with pytest.raises(OpenParseError) as info:
        parse_llama31(raw, ids())
    assert info.value.kind == "unparsable_reply" and info.value.raw_text == raw


def test_ids_are_deterministic_and_distinct() -> None:
    a, b = deterministic_ids("x|1"), deterministic_ids("x|1")
    first = [a(), a(), a()]
    assert first == [b(), b(), b()]
    assert len(set(first)) == 3
    assert all(i.startswith("call_") and len(i) == 5 + 64 for i in first)
    assert deterministic_ids("x|2")() != first[0]


def test_unknown_series_is_rejected() -> None:
    with pytest.raises(ValueError, match="no upstream parser"):
        parse_open_reply("mistral", "x", ids())


def test_arguments_are_reserialised_as_upstream() -> None:
    out = parse_qwen25('<tool_call>{"name":"f","arguments":{"a":1,"b":[1,2]}}</tool_call>', ids())
    assert out["tool_calls"][0]["function"]["arguments"] == json.dumps({"a": 1, "b": [1, 2]})


# ------------------------------------------------------------------- upstream's environment


def test_json_repair_is_upstreams_pin() -> None:
    from pytest_toolbench.benchmarks.toolhop.open_parsers import UPSTREAM_JSON_REPAIR, installed_json_repair

    assert UPSTREAM_JSON_REPAIR == "0.30.2"
    assert installed_json_repair() == UPSTREAM_JSON_REPAIR, "pip install json-repair==0.30.2"


@pytest.mark.parametrize(
    ("raw", "upstream_exception"),
    [
        # no tag: upstream's bare except leaves `tool_calls` unbound, the next line reads it
        ("[" * 5000, "UnboundLocalError"),
        # tag: json_repair's own exception escapes the parser
        ("<|python_tag|>" + "[" * 5000, "RecursionError"),
    ],
)
def test_parse_error_names_the_exception_upstream_raised(raw: str, upstream_exception: str) -> None:
    with pytest.raises(OpenParseError) as info:
        parse_open_reply("llama31", raw, ids())
    assert info.value.upstream_exception == upstream_exception


def _call_deep(frames: int, fn, *args):
    return fn(*args) if frames <= 0 else _call_deep(frames - 1, fn, *args)


def test_parser_runs_at_upstreams_stack_depth(monkeypatch: pytest.MonkeyPatch) -> None:
    """Upstream's parser is frame 9 of its ThreadPoolExecutor worker thread (5 executor frames,
    sample_process, sample_process_<scenario>, test_open): ours too, whatever the caller's depth."""
    from pytest_toolbench.benchmarks.toolhop import open_parsers

    depths = []

    def spy(text, new_id):
        frame, depth = sys._getframe(), 0
        while frame is not None:
            depth, frame = depth + 1, frame.f_back
        depths.append(depth)
        return {}

    monkeypatch.setitem(open_parsers.PARSERS, "qwen25", spy)
    parse_open_reply("qwen25", "", ids())
    _call_deep(300, parse_open_reply, "qwen25", "", ids())
    assert depths == [9, 9]


def test_deep_nesting_does_not_depend_on_the_callers_depth() -> None:
    """Near the recursion limit a direct call from a deep stack fails where upstream's parser
    (and parse_open_reply, at upstream's depth) still reads the call. The reply lacks its last
    brace, so json_repair's own parser reads it, two Python frames per level on every Python."""
    k = 400
    raw = '{"name": "f", "parameters": ' + '{"a": ' * k + "1" + "}" * k
    shallow = parse_open_reply("llama31", raw, ids())
    assert shallow["tool_calls"] and shallow["tool_calls"][0]["function"]["name"] == "f"
    assert _call_deep(300, parse_open_reply, "llama31", raw, ids()) == shallow
    with pytest.raises(OpenParseError):
        _call_deep(300, parse_llama31, raw, ids())
