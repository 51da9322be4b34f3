"""KG-augmented tool use as UnifiedToolHub's ``single_last`` mode (spec §4.1-4.2).

The chat history is the one user message (golden, extracted or full KG in the ``(...)`` slot); the
candidate tools go with it. Two formats:

* ``openai`` (APIRequester, OpenAI-compatible endpoints and the oracle): tools converted to the
  OpenAI function schema (type map, list-style properties, ``response`` dropped, dots in names ->
  ``_``), system message ``"You are a helpful assistant.\\nCurrent Date: YYYY-MM-DD"``,
  ``tool_choice`` a setting (upstream default ``auto``), T=0.7, max_tokens=1024.
* ``vllm`` (Qwen_2_5 family served by vLLM, whose chat template renders the tools): the raw tool
  documents wrapped as functions; the date reaches the system block through a system message
  built so that Qwen's template renders the same bytes as upstream's insertion of
  ``"Current Date: ...\\n\\n"`` before ``"# Tools"`` (exact for Qwen2.5 and Qwen3; QwQ and
  Llama-3.1 differ in whitespace/header lines: deviation). T=0.7, top_p=0.8, max_tokens=512;
  repetition_penalty 1.05 cannot be sent through the OpenAI wire format (deviation).

Parsing: structured ``tool_calls`` (arguments ``json.loads``, fallback ``ast.literal_eval``, else
``{}``); with none, the reply text is parsed like vLLM's Hermes2ProToolParser (any bad block voids
all calls).
"""

from __future__ import annotations

import ast
import copy
import json
import re
from typing import Any, Literal

ToolFormat = Literal["openai", "vllm"]
TYPE_MAP = {"str": "string", "int": "integer", "float": "number", "list": "array", "dict": "object"}
API_SYSTEM = "You are a helpful assistant.\nCurrent Date: {date}"
QWEN25_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
HERMES_RE = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


def _convert_property(spec: Any) -> dict[str, Any]:
    spec = dict(spec) if isinstance(spec, dict) else {}
    kind = spec.get("type")
    spec["type"] = TYPE_MAP.get(kind, kind) if kind else "string"
    return spec


def openai_tool(doc: dict[str, Any]) -> dict[str, Any]:
    """APIRequester's conversion of one MTU-Bench tool document to an OpenAI function."""
    params = doc.get("parameters") if isinstance(doc.get("parameters"), dict) else {}
    props = params.get("properties", {})
    if isinstance(props, list):  # list-style: [{"name", "description"}, ...]
        props = {
            p["name"]: {"description": p.get("description", "")}
            for p in props
            if isinstance(p, dict) and "name" in p
        }
    converted = {name: _convert_property(spec) for name, spec in (props or {}).items()}
    schema: dict[str, Any] = {"type": "object", "properties": converted}
    if params.get("required"):
        schema["required"] = list(params["required"])
    return {
        "type": "function",
        "function": {
            "name": str(doc["name"]).replace(".", "_"),
            "description": doc.get("description", ""),
            "parameters": schema,
        },
    }


def vllm_tool(doc: dict[str, Any]) -> dict[str, Any]:
    """The raw document as the template will render it (``response`` is not an OpenAI field)."""
    function = {k: copy.deepcopy(v) for k, v in doc.items() if k in ("name", "description", "parameters")}
    return {"type": "function", "function": function}


def vllm_system(model_name: str, date: str) -> str:
    line = f"Current Date: {date}"
    name = model_name.lower()
    if "qwen2.5" in name or "qwen-2.5" in name or "qwen2_5" in name:
        return f"{QWEN25_DEFAULT_SYSTEM}\n\n{line}"
    return line


def build_request_parts(
    user_content: str, tools: list[dict[str, Any]], fmt: ToolFormat, date: str, model_name: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    if fmt == "openai":
        messages = [
            {"role": "system", "content": API_SYSTEM.format(date=date)},
            {"role": "user", "content": user_content},
        ]
        return messages, [openai_tool(t) for t in tools]
    messages = [
        {"role": "system", "content": vllm_system(model_name, date)},
        {"role": "user", "content": user_content},
    ]
    return messages, [vllm_tool(t) for t in tools]


def parse_arguments(arguments: Any) -> Any:
    if isinstance(arguments, dict):
        return arguments
    try:
        return json.loads(arguments)
    except (TypeError, ValueError):
        pass
    try:
        return ast.literal_eval(arguments)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return {}


def hermes_calls(text: str) -> list[dict[str, Any]]:
    """vLLM Hermes2ProToolParser over the whole text: any failure -> no calls at all."""
    if "<tool_call>" not in (text or ""):
        return []
    calls = []
    try:
        for closed, open_ in HERMES_RE.findall(text):
            call = json.loads(closed if closed else open_)
            calls.append({"name": call["name"], "parameters": call["arguments"]})
    except (ValueError, KeyError, TypeError):
        return []
    return calls


def parse_reply(message: dict[str, Any]) -> list[dict[str, Any]]:
    """All calls of one assistant message as ``{"name", "parameters"}``."""
    structured = message.get("tool_calls") or []
    if structured:
        calls = []
        for call in structured:
            function = call.get("function") or {}
            calls.append({"name": function.get("name") or "", "parameters": parse_arguments(function.get("arguments"))})
        return calls
    return hermes_calls(message.get("content") or "")
