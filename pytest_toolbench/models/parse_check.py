"""Spot replies where tool calling broke *below* the model's decision.

A reply can look like "the model answered in prose" while the model in fact emitted a tool call
that the server's tool-call parser failed to extract (wrong ``--tool-call-parser``, a chat template
that strips markers, truncated output), or a call whose arguments are not valid JSON. Benchmarks
score such replies as upstream does; this check only labels them, so reports can tell a parser
problem from a model problem. It is deliberately conservative: prose that merely mentions a tool
name is not flagged.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pytest_toolbench.json_nesting import loads_as_upstream, nesting_limit
from pytest_toolbench.models.base import ParseFailure, content_text

#: Nesting past which upstream's executors fail to decode a call's arguments: CPython 3.11's
#: limit eight frames down a worker thread, where ToolHop's ``get_feedback`` decodes them. The
#: label then reads the same on every interpreter.
ARGUMENTS_NESTING_LIMIT = nesting_limit(8)

#: Text markers that various chat templates use to introduce a tool call.
#: Hermes/Qwen: ``<tool_call>``; Llama 3.x: ``<|python_tag|>``; Mistral: ``[TOOL_CALLS]``;
#: Llama 3.x/4 "function" style: ``<function=name>``.
TOOL_CALL_MARKERS: tuple[str, ...] = ("<tool_call>", "<|python_tag|>", "[TOOL_CALLS]", "<function=")

_ARGUMENT_KEYS = ("arguments", "parameters")
#: Bound the work on pathological content (e.g. thousands of braces).
_MAX_JSON_STARTS = 500
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
#: Where a JSON object or list may start.
_JSON_START = re.compile(r"[\[{]")


def detect_parse_failure(message: dict[str, Any]) -> ParseFailure | None:
    """Return why ``message`` (an OpenAI-format assistant message) holds a broken tool call."""
    tool_calls = message.get("tool_calls") or []
    if tool_calls:
        return _check_arguments(tool_calls)
    content = content_text(message.get("content"))
    if not content:
        return None
    for marker in TOOL_CALL_MARKERS:
        if marker in content:
            return ParseFailure(
                reason="unextracted_tool_call",
                raw_text=content,
                detail=f"content holds the tool-call marker {marker!r} but no tool_calls were parsed",
            )
    call = _find_json_tool_call(content)
    if call is not None:
        return ParseFailure(
            reason="unextracted_tool_call",
            raw_text=content,
            detail=f"content holds a JSON tool call to {call!r} but no tool_calls were parsed",
        )
    return None


def _check_arguments(tool_calls: list[Any]) -> ParseFailure | None:
    for index, call in enumerate(tool_calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue  # non-function tool types carry no JSON arguments
        name = function.get("name")
        arguments = function.get("arguments")
        where = f"tool_calls[{index}] ({name!r})"
        if not isinstance(arguments, str):
            return ParseFailure(
                reason="invalid_arguments_json",
                raw_text=json.dumps(arguments, default=str),
                detail=f"{where}: arguments is a {type(arguments).__name__}, not a JSON string",
            )
        try:
            parsed = loads_as_upstream(arguments, ARGUMENTS_NESTING_LIMIT)
        except json.JSONDecodeError as exc:
            return ParseFailure(
                reason="invalid_arguments_json",
                raw_text=arguments,
                detail=f"{where}: arguments are not valid JSON ({exc.msg} at char {exc.pos})",
            )
        except RecursionError:
            # Too deeply nested for json.loads: a label, never a crash (upstream's executor turns
            # the same RecursionError into an ordinary failed call).
            return ParseFailure(
                reason="invalid_arguments_json",
                raw_text=arguments,
                detail=f"{where}: arguments are nested too deeply to decode",
            )
        except ValueError as exc:  # valid JSON json.loads still refuses: a 5,000-digit number
            return ParseFailure(
                reason="invalid_arguments_json",
                raw_text=arguments,
                detail=f"{where}: arguments cannot be decoded ({_before_colon(exc)})",
            )
        if not isinstance(parsed, dict):
            return ParseFailure(
                reason="invalid_arguments_json",
                raw_text=arguments,
                detail=f"{where}: arguments are JSON {type(parsed).__name__}, not an object",
            )
    return None


def _before_colon(exc: Exception) -> str:
    """The message up to its first colon: what went wrong, without the figures after it."""
    return str(exc).split(":")[0]


def _find_json_tool_call(content: str) -> str | None:
    """Name of the first ``{"name": ..., "arguments"|"parameters": ...}`` object in the text.

    Looks inside ```json fences first, then anywhere in the text; a JSON list of such objects
    (Mistral without its marker) counts too.
    """
    # Most replies are prose with no JSON at all (this runs on every reply, in the SDK process):
    # no object or list can start in the text, nor in a fence inside it.
    if "{" not in content and "[" not in content:
        return None
    candidates = [m.group(1) for m in _FENCE.finditer(content)] + [content]
    decoder = json.JSONDecoder()
    for text in candidates:
        starts = 0
        for match in _JSON_START.finditer(text):
            starts += 1
            if starts > _MAX_JSON_STARTS:
                break
            try:
                value, _ = decoder.raw_decode(text, match.start())
            except (json.JSONDecodeError, RecursionError):
                continue
            name = _tool_call_name(value)
            if name is not None:
                return name
    return None


def _tool_call_name(value: Any) -> str | None:
    items = value if isinstance(value, list) else [value]
    for item in items:
        if (
            isinstance(item, dict)
            and isinstance(item.get("name"), str)
            and any(key in item for key in _ARGUMENT_KEYS)
        ):
            return item["name"]
    return None
