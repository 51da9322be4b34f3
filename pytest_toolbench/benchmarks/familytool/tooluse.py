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
``{}``); with none (the raw text of ``--decoding open``, or a server that parsed nothing), the text
is parsed as upstream's vLLM parser for the model's type would: Hermes2ProToolParser for
``Qwen_2_5`` (Qwen2.5, QwQ, Qwen3; any bad block voids all calls) and Llama3JsonToolParser for
``Llama_3_1`` (the vLLM 0.8 version current at the upstream commit: the text must start with
``{`` or ``<|python_tag|>``; objects separated by ``"; "``; ``arguments`` or ``parameters``; any
failure -> no calls).

Sampling per type (UnifiedToolHub defaults, spec §4.2): APIRequester T=0.7, max_tokens=1024;
Qwen_2_5 T=0.7, top_p=0.8, max_tokens=512; Llama_3_1 T=0.5, top_p=0.9, max_tokens=512 (the paper
says 0.7 for all; the code's default wins). repetition_penalty 1.05 is not sent (deviation).
"""

from __future__ import annotations

import ast
import copy
import json
import re
from typing import Any, Literal

ToolFormat = Literal["openai", "vllm"]
TextParser = Literal["hermes", "llama3_json"]
LLAMA_BOT = "<|python_tag|>"
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


def llama3_json_calls(text: str) -> list[dict[str, Any]]:
    """vLLM (0.8) Llama3JsonToolParser.extract_tool_calls: any failure -> no calls at all."""
    text = text or ""
    if not (text.startswith(LLAMA_BOT) or text.startswith("{")):
        return []
    decoder, calls = json.JSONDecoder(), []
    start = len(LLAMA_BOT) if text.startswith(LLAMA_BOT) else 0
    try:
        while start < len(text):
            obj, end = decoder.raw_decode(text[start:])
            start += end + len("; ")
            arguments = obj["arguments"] if "arguments" in obj else obj["parameters"]
            calls.append({"name": obj["name"], "parameters": arguments})
    except (ValueError, KeyError, TypeError):
        return []
    return calls


def text_parser_for(family: str) -> TextParser:
    """UnifiedToolHub's model type: ``llama3.1``/``llama-3.1`` paths are Llama_3_1, the rest of the
    vLLM-served models (Qwen2.5, QwQ, Qwen3 as configured) Qwen_2_5."""
    return "llama3_json" if family.startswith("llama3") else "hermes"


def tool_sampling(fmt: ToolFormat, parser: TextParser) -> tuple[float, int, float | None]:
    """(temperature, max_tokens, top_p): UnifiedToolHub's per-type defaults."""
    if fmt == "openai":
        return 0.7, 1024, None
    if parser == "llama3_json":
        return 0.5, 512, 0.9
    return 0.7, 512, 0.8


def parse_reply(message: dict[str, Any], parser: TextParser = "hermes") -> list[dict[str, Any]]:
    """All calls of one assistant message as ``{"name", "parameters"}``."""
    structured = message.get("tool_calls") or []
    if structured:
        calls = []
        for call in structured:
            function = call.get("function") or {}
            calls.append({"name": function.get("name") or "", "parameters": parse_arguments(function.get("arguments"))})
        return calls
    text = message.get("content") or ""
    return llama3_json_calls(text) if parser == "llama3_json" else hermes_calls(text)
