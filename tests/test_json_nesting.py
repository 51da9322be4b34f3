"""CPython 3.11's JSON nesting limit, reproduced on any interpreter (``pytest_toolbench.json_nesting``).

Two kinds of test: hand-computed limits and verdicts that hold on every interpreter, and, where
the running interpreter is 3.10 or 3.11 (whose C ``json`` code counts against the recursion
limit), the rule against the real ``json.loads`` / ``json.dumps`` called from a known frame, at
and around the limit, for texts and values of every shape the rule reasons about.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

import pytest

from pytest_toolbench.json_nesting import (
    check_nesting,
    dumps_as_upstream,
    loads_as_upstream,
    nesting_limit,
    on_fresh_stack,
)

COUNTING_C_JSON = sys.version_info < (3, 12)
needs_counting_json = pytest.mark.skipif(
    not COUNTING_C_JSON,
    reason="from Python 3.12 json's C code has its own recursion limit: no 3.11 behaviour to compare with",
)
ARRAY_TOO_DEEP = "maximum recursion depth exceeded while decoding a JSON array from a unicode string"
OBJECT_TOO_DEEP = "maximum recursion depth exceeded while decoding a JSON object from a unicode string"
ENCODING_TOO_DEEP = "maximum recursion depth exceeded while encoding a JSON object"
CALLING = "maximum recursion depth exceeded while calling a Python object"
PLAIN = "maximum recursion depth exceeded"


def arrays(n: int) -> str:
    return "[" * n + "]" * n


def objects(n: int) -> str:
    return '{"a": ' * n + "1" + "}" * n


def nested_list(n: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(n):
        value = [value]
    return value


def outcome(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """What the call gave: ("ok", the value written back as JSON text, so that comparing two
    deep values does not itself recurse too deep) or (exception type, message)."""
    try:
        value = function(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the outcome is what is compared
        return type(exc).__name__, str(exc)
    return "ok", value if isinstance(value, str) else on_fresh_stack(json.dumps, value)


def from_frame(frame: int, function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """The outcome of ``function(*args)`` called from frame ``frame`` of a fresh thread."""

    def descend(here: int) -> Any:
        if here == frame:
            return function(*args, **kwargs)
        return descend(here + 1)

    return outcome(on_fresh_stack, descend, 5)  # threading's 3 frames, on_fresh_stack's target


# ------------------------------------------------------------------- hand-computed, any Python


def test_limits_are_upstreams_measured_ones():
    # get_feedback (frame 8 of upstream's worker thread) decoded arguments 988 deep and failed at
    # 989, and encoded a tool's 988-deep result but not a 989-deep one (CPython 3.11.7).
    assert nesting_limit(8) == 988
    assert nesting_limit(11) == 985  # json_repair.loads -> repair_json under the open parsers


@pytest.mark.parametrize(
    ("text", "message"),
    [(arrays(989), ARRAY_TOO_DEEP), (objects(989), OBJECT_TOO_DEEP), ("[" * 988 + '{"a": 1}' + "]" * 988, OBJECT_TOO_DEEP)],
)
def test_one_level_past_the_limit_raises_311s_error(text, message):
    with pytest.raises(RecursionError) as raised:
        loads_as_upstream(text, 988)
    assert str(raised.value) == message


def test_at_the_limit_decodes_even_from_a_deep_stack():
    def deep(k: int) -> Any:
        return loads_as_upstream(arrays(988), 988) if k == 0 else deep(k - 1)

    assert on_fresh_stack(json.dumps, deep(100)) == arrays(988)


@pytest.mark.parametrize(
    "text",
    [
        "[1 2, " + "[" * 2000,  # a syntax error before the deep part: the scanner stops there
        '{"a": 1, ' + "[" * 2000,  # a bracket where a key belongs is an error, not a container
        "[] " + "[" * 2000,  # extra data after a complete value is never scanned
        '["abc' + "[" * 2000,  # an unterminated string
        "[1]]" + "[" * 2000,  # a stray closer
    ],
    ids=["error-first", "key-position", "extra-data", "unterminated", "stray-closer"],
)
def test_texts_the_scanner_never_reads_that_deep_fail_as_json_errors(text):
    check_nesting(text, 988)  # no RecursionError
    with pytest.raises(json.JSONDecodeError):
        loads_as_upstream(text, 988)


@pytest.mark.parametrize(
    "text",
    ['["' + "[" * 2000 + '"]', '["\\"' + "[" * 2000 + '"]', '{"[": "{' + "{" * 2000 + '"}'],
    ids=["in-string", "escaped-quote", "key-and-value"],
)
def test_brackets_in_strings_are_not_containers(text):
    assert loads_as_upstream(text, 988) == json.loads(text)


def test_a_deep_text_with_an_error_past_the_limit_is_too_deep():
    with pytest.raises(RecursionError, match="JSON array"):
        loads_as_upstream("[" * 989 + "x", 988)


@pytest.mark.parametrize(
    ("depth", "expected"),
    [
        (985, ("JSONDecodeError", "Expecting ',' delimiter: line 1 column 988 (char 987)")),
        (986, ("RecursionError", CALLING)),
        (987, ("RecursionError", PLAIN)),
        (988, ("RecursionError", CALLING)),
        (989, ("RecursionError", ARRAY_TOO_DEEP)),
    ],
)
def test_a_syntax_error_raised_near_the_limit_costs_three_levels(depth, expected):
    # 3.11 builds the JSONDecodeError from inside the C scanner: a call, an __init__ frame, a call
    assert outcome(loads_as_upstream, "[" * depth + "1 2", 988) == expected


def test_expecting_value_is_raised_at_the_top_and_costs_nothing():
    assert outcome(loads_as_upstream, "[" * 988 + "x", 988) == (
        "JSONDecodeError", "Expecting value: line 1 column 989 (char 988)"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": [1, ]}', "Expecting value: line 1 column 11 (char 10)"),
        ('{"a": 1,\n }', "Expecting property name enclosed in double quotes: line 2 column 2 (char 10)"),
    ],
    ids=["array", "object"],
)
def test_a_trailing_comma_reads_as_311_wrote_it(text, expected):
    # 3.13 says "Illegal trailing comma before end of ..." at the comma; the model saw 3.11's text
    assert outcome(loads_as_upstream, text, 988) == ("JSONDecodeError", expected)


def test_non_text_is_left_to_json():
    check_nesting(None, 1)
    with pytest.raises(TypeError):
        loads_as_upstream(None, 988)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (nested_list(988), ("ok", "[" * 988 + "1" + "]" * 988)),
        (nested_list(989), ("RecursionError", ENCODING_TOO_DEEP)),
        ({"k": nested_list(988)}, ("RecursionError", ENCODING_TOO_DEEP)),
        # what fails first, in the encoder's depth-first order, decides
        ([nested_list(988), {1, 2}], ("RecursionError", ENCODING_TOO_DEEP)),
        ([{1, 2}, nested_list(988)], ("TypeError", "Object of type set is not JSON serializable")),
        ({(1, 2): 1, "k": nested_list(988)}, ("TypeError", "keys must be str, int, float, bool or None, not tuple")),
        ({1: nested_list(988)}, ("RecursionError", ENCODING_TOO_DEEP)),  # an int key is written
        # JSONEncoder.default is Python, called from C: two levels more
        (nested_list(986, leaf={1}), ("TypeError", "Object of type set is not JSON serializable")),
        (nested_list(987, leaf={1}), ("RecursionError", CALLING)),
        (nested_list(988, leaf={1}), ("RecursionError", PLAIN)),
        # an unprintable int and a bad key fail in C: no cost
        (nested_list(988, leaf=10**5000), ("ValueError", ValueError)),
        (nested_list(987, leaf={(1,): 1}), ("TypeError", "keys must be str, int, float, bool or None, not tuple")),
    ],
    ids=["at-limit", "past-limit", "in-dict", "deep-first", "set-first", "bad-key-first", "int-key",
         "default-986", "default-987", "default-988", "long-int-988", "bad-key-988"],
)
def test_dumps_fails_where_upstreams_encoder_did(value, expected):
    got = outcome(dumps_as_upstream, value, 988, ensure_ascii=False)
    if expected[1] is ValueError:
        assert got[0] == "ValueError" and got[1].startswith("Exceeds the limit (4300")  # 3.10 words it a little differently
    else:
        assert got == expected


@pytest.mark.parametrize(
    ("depth", "expected"),
    [
        (987, ("ValueError", "Circular reference detected")),
        (988, ("RecursionError", "maximum recursion depth exceeded in comparison")),
        (989, ("RecursionError", ENCODING_TOO_DEEP)),
    ],
)
def test_dumps_circular_reference_found_by_a_comparison(depth, expected):
    loop: list[Any] = []
    loop.append(loop)  # met again at `depth`
    assert outcome(dumps_as_upstream, nested_list(depth - 2, leaf=loop), 988) == expected


# ------------------------------------------------------- against 3.10 / 3.11's own C json code


def text_shapes(n: int) -> dict[str, str]:
    """Texts that nest ``n`` deep at their deepest, in the shapes the rule reasons about."""
    return {
        "arrays": arrays(n),
        "objects": objects(n),
        "mixed": "".join("[" if i % 2 else '{"a": ' for i in range(n)) + "1"
        + "".join("]" if i % 2 else "}" for i in reversed(range(n))),
        "error-after": "[" * n + "x",
        "error-before": "[1 2, " + "[" * n,
        "key-position": '{"a": ' * (n - 1) + "{[]}" + "}" * (n - 1),
        "strings": '["[{", ' * n + '"]}"' + "]" * n,
        "extra-data": "[1] " + arrays(n),
        "comma-array": "[" * n + "1 2",
        "colon": "[" * (n - 1) + '{"a" 1}',
        "comma-object": "[" * (n - 1) + '{"a": 1 "b"',
        "unterminated": "[" * n + '"abc',
        "control": "[" * n + '"a\x01"',
        "escape": "[" * n + '"\\q"',
        "trailing-array": "[" * n + "1, ]",
        "trailing-object": "[" * (n - 1) + '{"a": 1, }',
        "number": "[" * n + "1.]",
    }


@needs_counting_json
@pytest.mark.parametrize("frame", [8, 11, 30])
def test_loads_verdicts_match_the_real_decoder(frame):
    limit = nesting_limit(frame)
    for n in range(limit - 4, limit + 3):
        for shape, text in text_shapes(n).items():
            real = from_frame(frame, json.loads, text)
            assert outcome(loads_as_upstream, text, limit) == real, (frame, n, shape)


@needs_counting_json
@pytest.mark.parametrize("frame", [8, 30])
def test_dumps_verdicts_match_the_real_encoder(frame):
    limit = nesting_limit(frame)
    loop: list[Any] = []
    loop.append(loop)
    for n in range(limit - 4, limit + 3):
        values = {
            "list": nested_list(n),
            "dict": {"a": nested_list(n - 1)},
            "set-after": [nested_list(n - 1), {1}],
            "set-before": [{1}, nested_list(n - 1)],
            "set-leaf": nested_list(n, leaf={1}),
            "object-leaf": nested_list(n, leaf=object()),
            "long-int-leaf": nested_list(n, leaf=10**5000),
            "bad-key": nested_list(n - 1, leaf={(1,): 1}),
            "int-key": nested_list(n - 1, leaf={2: 1}),
            "circular": nested_list(n - 2, leaf=loop),
        }
        for shape, value in values.items():
            real = from_frame(frame, json.dumps, value, ensure_ascii=False)
            assert outcome(dumps_as_upstream, value, limit, ensure_ascii=False) == real, (frame, n, shape)
