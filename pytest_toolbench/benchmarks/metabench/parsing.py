"""Turns an assistant reply into ``{"name", "parameters"}`` calls.

Two readings of "the reply invokes a tool" (``--metabench-call-reading``):

``invocation`` (default; the paper's "invocation of any tool", IRR, paper §3.3.2)
    Only a real invocation counts: structured ``tool_calls`` (a server-side parser), or text in
    a call syntax a model family emits. The text is cut into Llama messages at ``<|eom_id|>``,
    ``<|eot_id|>`` and ``<|start_header_id|>assistant<|end_header_id|>``; in each piece

    * ``<tool_call>...</tool_call>`` blocks (Hermes/Qwen): each block holds call JSON only;
    * ``<|python_tag|>``/``<python_tag>`` (Llama) or ``[TOOL_CALLS]`` (Mistral): reasoning may
      come before the tag, and everything after it is call JSON only;
    * no tag: the whole piece is call JSON only: one object, a list, or several of them
      separated by whitespace (the Figure 10 format, Figs 17-19).

    A call object has a string ``name`` and no keys beyond ``parameters``/``arguments``,
    ``type`` and ``id`` (or is an OpenAI ``{"type": "function", "function": {...}}`` wrapper).
    So JSON inside prose, inside a Markdown code fence, or shaped like data
    (``{"name": "John", "age": 30}``) is not a call: a chat answer that shows a JSON example
    abstains.
``any_json``
    The earlier, loose reading: every JSON value anywhere in the text that has a string ``name``
    is a call, code fences and prose around it included.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

CallReading = Literal["invocation", "any_json"]

_SEPARATORS = re.compile(
    r"<\|python_tag\|>|<python_tag>|<\|eom_id\|>|<\|eot_id\|>|"
    r"<\|start_header_id\|>\s*assistant\s*<\|end_header_id\|>"
)
_MESSAGE_BREAK = re.compile(r"<\|eom_id\|>|<\|eot_id\|>|<\|start_header_id\|>\s*assistant\s*<\|end_header_id\|>")
_PYTHON_TAG = re.compile(r"<\|python_tag\|>|<python_tag>")
_CALL_TAG = re.compile(r"<\|python_tag\|>|<python_tag>|\[TOOL_CALLS\]")
_HERMES_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
#: Keys a call object may carry besides ``name`` (``type`` appears in Fig 17).
_CALL_KEYS = frozenset({"name", "parameters", "arguments", "type", "id"})
_DECODER = json.JSONDecoder()


def split_reasoning(text: str) -> tuple[str, str]:
    """(reasoning, tail) around the first python tag; ("", text) when there is none."""
    match = _PYTHON_TAG.search(text)
    if match is None:
        return "", text
    return text[: match.start()].strip(), text[match.end() :]


def as_call(value: Any, exact_keys: bool = False) -> dict[str, Any] | None:
    """A call dict ``{"name", "parameters"}`` from one JSON value, or None if it is not a call.

    ``parameters`` is the payload key the paper uses; ``arguments`` (a dict or a JSON string) is
    accepted as a fallback, a missing payload is ``{}``. ``exact_keys`` rejects objects with
    keys a call does not have (the invocation reading: ``{"name": "John", "age": 30}`` is data).
    """
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict) and "name" not in value:
        if exact_keys and not set(value) <= {"function", "type", "id"}:
            return None
        value = value["function"]
    name = value.get("name")
    if not isinstance(name, str) or not name:
        return None
    if exact_keys and not set(value) <= _CALL_KEYS:
        return None
    params = value.get("parameters", value.get("arguments", {}))
    if isinstance(params, str):
        try:
            params = json.loads(params) if params.strip() else {}
        except (ValueError, RecursionError):  # too deep: not JSON here
            return {"name": name, "parameters": params}
    if params is None:
        params = {}
    return {"name": name, "parameters": params}


def _only_calls(text: str) -> list[dict[str, Any]]:
    """The calls of ``text`` if it is nothing but whitespace-separated call JSON, else []."""
    calls: list[dict[str, Any]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i == n:
            return calls
        try:
            value, i = _DECODER.raw_decode(text, i)
        except (ValueError, RecursionError):  # too deep: not JSON here
            return []
        for item in value if isinstance(value, list) else [value]:
            call = as_call(item, exact_keys=True)
            if call is None:
                return []
            calls.append(call)


def _piece_calls(piece: str) -> list[dict[str, Any]]:
    """Calls of one Llama message of the reply, in the syntax it uses (module docstring)."""
    if "<tool_call>" in piece:
        return [c for block in _HERMES_BLOCK.findall(piece) for c in _only_calls(block)]
    tag = _CALL_TAG.search(piece)
    tail = piece[tag.end() :] if tag else piece
    return _only_calls(_CALL_TAG.sub(" ", tail))


def invocation_calls(text: str | None) -> list[dict[str, Any]]:
    """Calls made in a family's call syntax (the ``invocation`` reading); prose gives []."""
    if not text:
        return []
    return [c for piece in _MESSAGE_BREAK.split(text) for c in _piece_calls(piece)]


def any_json_calls(text: str | None) -> list[dict[str, Any]]:
    """Every JSON value with a string ``name`` anywhere in ``text`` (the ``any_json`` reading)."""
    if not text:
        return []
    text = _SEPARATORS.sub("\n", text)
    calls: list[dict[str, Any]] = []
    i = 0
    while i < len(text):
        if text[i] not in "[{":
            i += 1
            continue
        try:
            value, end = _DECODER.raw_decode(text, i)
        except (ValueError, RecursionError):  # too deep: not JSON here
            i += 1
            continue
        items = value if isinstance(value, list) else [value]
        found = [c for c in (as_call(v) for v in items) if c is not None]
        if found:
            calls.extend(found)
            i = end
        else:
            i += 1  # a JSON value that is not a call (e.g. a dict inside prose): look inside it
    return calls


def calls_in_text(text: str | None, reading: CallReading = "invocation") -> list[dict[str, Any]]:
    """Every call in ``text``, in order, under ``reading`` (module docstring)."""
    return invocation_calls(text) if reading == "invocation" else any_json_calls(text)


def uncounted_json(text: str | None) -> list[dict[str, Any]]:
    """Calls the ``any_json`` reading finds that the ``invocation`` reading does not (JSON in
    prose, fences or data objects): kept in a case's details so a report shows what the
    default reading set aside."""
    counted = invocation_calls(text)
    out = []
    for call in any_json_calls(text):
        if call in counted:
            counted.remove(call)
        else:
            out.append(call)
    return out


def message_text(message: dict[str, Any]) -> str | None:
    """The text content of an OpenAI-format message (a list of parts is joined)."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else None


def calls_in_message(message: dict[str, Any], reading: CallReading = "invocation") -> list[dict[str, Any]]:
    """Calls of an OpenAI-format assistant message: structured ``tool_calls`` first, then those
    written in its text content."""
    calls: list[dict[str, Any]] = []
    for tool_call in message.get("tool_calls") or []:
        call = as_call((tool_call or {}).get("function") or tool_call)
        if call is not None:
            calls.append(call)
    return calls + calls_in_text(message_text(message), reading)
