"""Text that UTF-8 can carry: lone surrogates replaced by U+FFFD.

A JSON ``\\ud800`` escape with no low surrogate after it decodes, in Python, to a string holding
a lone surrogate. A model writes one (in its reply, or inside a tool call's ``arguments``), and an
LLM-written tool can return one. Such a string cannot be encoded as UTF-8: the request body, the
response cache, the SDK process's frames and the results journal all raised on it, one case
hanging the run (its reply never crossed to the pytest process) or ending it with an
INTERNALERROR. Every place text leaves the process is UTF-8, so the harness replaces each lone
surrogate by U+FFFD, the replacement character a UTF-8 decoder puts for bytes it cannot read,
where text enters its requests, replies and results.

Scoring is unchanged in effect: no gold answer, tool name or parameter holds either character,
and every benchmark's normaliser treats them alike (neither is a letter, digit or space).
A pair (``\\ud83d\\ude00``) is one character once decoded and is kept.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def safe_str(text: str) -> str:
    """``text`` with each lone surrogate replaced; the same object when it holds none."""
    if text.isascii():  # O(1) in CPython: almost every string of a run leaves here
        return text
    return _LONE_SURROGATE.sub(REPLACEMENT, text)


def has_lone_surrogate(value: Any) -> bool:
    """Whether any string in ``value`` (dict keys too, through dicts, lists and tuples) holds a
    lone surrogate. It runs on every request, reply and result: a string is checked by an O(1)
    ``isascii`` first, a container by pydantic-core's encoder, which fails on a lone surrogate
    and is 3-4x faster than walking it in Python (a ToolHop request: 5.6 against 20 us)."""
    if isinstance(value, str):
        return not value.isascii() and _LONE_SURROGATE.search(value) is not None
    if not isinstance(value, (dict, list, tuple)):
        return False
    try:
        to_json(value)
    except PydanticSerializationError:  # a lone surrogate, or a value it cannot write: look
        return _walk_finds_one(value)
    return False


def _walk_finds_one(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and _LONE_SURROGATE.search(item) is not None:
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def utf8_safe(value: Any) -> Any:
    """``value`` with :func:`safe_str` applied to every string in it (dict keys too, through
    dicts, lists and tuples): a copy where something changes, else ``value`` itself."""
    if not has_lone_surrogate(value):
        return value
    return _replaced(value)


def _replaced(value: Any) -> Any:
    if isinstance(value, str):
        return safe_str(value)
    if isinstance(value, dict):
        return {_replaced(k): _replaced(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replaced(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_replaced(item) for item in value)
    return value


def make_model_utf8_safe(model: Any) -> None:
    """In place: every string in a pydantic model's fields (nested models too) made safe: a
    request or reply as it is built, a result before it is journalled, sent and reported.
    Values are read and written in the model's ``__dict__`` (where pydantic keeps them), and
    only where one changes: an assignment would mark a field left unset as set (a request body
    leaves unset fields out), fail on a frozen model, or validate again."""
    fields = vars(model)
    try:  # one encoder pass over every field, nested models included: 3x cheaper than per field
        to_json(fields)  # (a case result: ~10 against ~35 us)
        return
    except PydanticSerializationError:  # a lone surrogate, or a value it cannot write: look
        pass
    for name, value in list(fields.items()):
        if hasattr(type(value), "model_fields"):
            make_model_utf8_safe(value)
            continue
        new = utf8_safe(value)
        if new is not value:
            fields[name] = new
