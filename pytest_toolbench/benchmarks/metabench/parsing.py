"""Turns an assistant reply into ``{"name", "parameters"}`` calls, accepting every output shape the
paper's figures show (spec §2): one JSON object, a JSON list, several objects on separate lines,
reasoning text followed by ``<|python_tag|>`` (or ``<python_tag>``) and a list, extra keys such as
``"type": "function"``, and Llama separators between calls. OpenAI ``tool_calls`` (a server-side
parser) are read too. Anything that holds no call is prose: "no tool invoked".
"""

from __future__ import annotations

import json
import re
from typing import Any

_SEPARATORS = re.compile(
    r"<\|python_tag\|>|<python_tag>|<\|eom_id\|>|<\|eot_id\|>|"
    r"<\|start_header_id\|>\s*assistant\s*<\|end_header_id\|>"
)
_DECODER = json.JSONDecoder()


def split_reasoning(text: str) -> tuple[str, str]:
    """(reasoning, tail) around the first python tag; ("", text) when there is none."""
    match = re.search(r"<\|python_tag\|>|<python_tag>", text)
    if match is None:
        return "", text
    return text[: match.start()].strip(), text[match.end() :]


def as_call(value: Any) -> dict[str, Any] | None:
    """A call dict ``{"name", "parameters"}`` from one JSON value, or None if it is not a call.

    ``parameters`` is the payload key the paper uses; ``arguments`` (a dict or a JSON string) is
    accepted as a fallback, a missing payload is ``{}``."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict) and "name" not in value:
        value = value["function"]
    name = value.get("name")
    if not isinstance(name, str) or not name:
        return None
    params = value.get("parameters", value.get("arguments", {}))
    if isinstance(params, str):
        try:
            params = json.loads(params) if params.strip() else {}
        except ValueError:
            return {"name": name, "parameters": params}
    if params is None:
        params = {}
    return {"name": name, "parameters": params}


def calls_in_text(text: str | None) -> list[dict[str, Any]]:
    """Every call found in ``text``, in order (strict JSON values only; prose is skipped)."""
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
        except ValueError:
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


def calls_in_message(message: dict[str, Any]) -> list[dict[str, Any]]:
    """Calls of an OpenAI-format assistant message: structured ``tool_calls`` first, then those
    written in its text content."""
    calls: list[dict[str, Any]] = []
    for tool_call in message.get("tool_calls") or []:
        call = as_call((tool_call or {}).get("function") or tool_call)
        if call is not None:
            calls.append(call)
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return calls + calls_in_text(content if isinstance(content, str) else None)
