"""KG-augmented tool use as UnifiedToolHub's ``single_last`` mode (``benchmark/evaluate_model.py``, ``models/``).

Upstream: ``resources/UnifiedToolHub`` of ``yxzwang/FamilyTool`` @ c3c5fc7 (``models/
api_requester.py``, ``models/qwen_2_5.py``, ``models/llama_3_1.py``, ``models/deepseek_r1.py``,
``models/base.py``, ``benchmark/metrics.py``). Where a summary of it and that code differ, the
code wins. The chat history is the one user message (golden, extracted or full KG in the ``(...)``
slot); the candidate tools go with it. Three formats:

* ``openai`` (APIRequester: OpenAI-compatible endpoints and the oracle): the tool documents
  converted as ``convert_to_openai_tools`` converts them (:func:`openai_tool`), system message
  ``"You are a helpful assistant.\nCurrent Date: YYYY-MM-DD"``, ``tool_choice`` a setting
  (upstream default ``auto``), T=0.7, max_tokens=1024. Only structured ``tool_calls`` count:
  upstream never reads ``<tool_call>`` text in an API reply's content
  (``--familytool-api-text-tool-calls`` turns that fallback on).
* ``vllm`` (Qwen_2_5 / Llama_3_1 formatters, whose HF chat template renders the tools): upstream
  hands ``apply_chat_template`` the **raw** tool documents (``response`` included, no
  ``{"type": "function"}`` wrapper). Over HTTP they travel as ``chat_template_kwargs.tools``
  (vLLM lets a request's template kwargs replace the ``tools`` it would derive from ``tools=``), so
  the server's template renders upstream's bytes. The date reaches Qwen's system block through a
  system message built so that the template renders what upstream's insertion of
  ``"Current Date: ...\n\n"`` before ``"# Tools"`` gives (exact for Qwen2.5 and Qwen3; QwQ and
  Llama-3.1 differ in whitespace/header lines: ledger). T=0.7, top_p=0.8, max_tokens=512;
  ``skip_special_tokens: false`` in the body, as ``evaluate_model`` samples every local model
  (Llama-3.1's ``<|python_tag|>`` stays in the text); repetition_penalty 1.05 is added by the
  runner (vLLM reads it from the body).
* ``deepseek_r1`` (APIRequester for the model named ``deepseek-reasoner``): no ``tools`` field;
  one user message listing the raw tool documents as JSON lines (``DeepSeek_R1.get_messages``);
  the reply's content is read as JSON (``json.loads``, then ``ast.literal_eval``, else ``{}``), a
  single object wrapped in a list, items without ``name`` and ``parameters`` dropped.

Parsing of ``vllm`` replies: structured ``tool_calls`` when a server parser made them (decodings
``closed`` / ``open-server-parser``); otherwise the text, as upstream's vLLM parser for the model's
type reads it: Hermes2ProToolParser for ``Qwen_2_5`` (Qwen2.5, QwQ, Qwen3; any bad block voids all
calls) and Llama3JsonToolParser for ``Llama_3_1`` (the vLLM 0.8 version current at the upstream
commit: the text must start with ``{`` or ``<|python_tag|>``; objects separated by ``"; "``;
``arguments`` or ``parameters``; any failure -> no calls). ``BaseFormatter.get_tool_call`` then
tests ``"</think>" in result.content``: for a tokenizer with ``</think>`` (QwQ, Qwen3, R1 distills)
a reply that *starts* with ``<tool_call>`` has ``content=None``, the test raises, and the bare
``except`` returns no calls at all (:func:`hermes_calls` with ``think_vocab``).
"""

from __future__ import annotations

import ast
import copy
import json
import re
from pathlib import Path
from typing import Any, Literal

ToolFormat = Literal["openai", "vllm", "deepseek_r1"]
TextParser = Literal["hermes", "llama3_json"]
LLAMA_BOT = "<|python_tag|>"
TOOL_CALL_START = "<tool_call>"
TYPE_MAP = {"str": "string", "int": "integer", "float": "number", "list": "array", "dict": "object"}
API_SYSTEM = "You are a helpful assistant.\nCurrent Date: {date}"
QWEN25_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
HERMES_RE = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)
#: The model name APIRequester sends down DeepSeek_R1's plain-text path.
DEEPSEEK_REASONER = "deepseek-reasoner"
_R1_FORMAT = '{"name":"tool_name", "parameters": {"key_1":value_1, "key_2": value_2} }'
_R1_FORMAT_MORE = (
    '[{"name":"tool_1", "parameters": {"key_1":value_1, "key_2": value_2} }, '
    '{"name":"tool_2", "parameters": {"key_3":value_3, "key_3": value_3} }]'
)


# --- APIRequester.convert_to_openai_tools ---------------------------------------------------------
def _map_type(value: Any) -> str:
    """Lower-case, then map Python type names; a list takes its first item; anything else (or
    nothing) is ``string``."""
    if isinstance(value, list) and value:
        value = value[0]
    elif not isinstance(value, str):
        return "string"
    lowered = str(value).lower()
    return TYPE_MAP.get(lowered, lowered)


def _nested_properties(properties: Any) -> dict[str, Any]:
    """``process_properties``: nested specs are kept whole (defaults, enums and all), only their
    ``type``, nested ``properties`` and array ``items`` are mapped; non-dict values pass as is."""
    result: dict[str, Any] = {}
    if not isinstance(properties, dict):
        return result
    for key, value in properties.items():
        if not isinstance(value, dict):
            result[str(key).replace(".", "_")] = value
            continue
        spec = dict(value)
        if "type" in spec:
            spec["type"] = _map_type(spec["type"])
        if "properties" in spec:
            spec["properties"] = _nested_properties(spec["properties"])
        if spec.get("type") == "array" and "items" in spec:
            _map_items(spec["items"])
        result[str(key).replace(".", "_")] = spec
    return result


def _map_items(items: Any) -> None:
    """Upstream maps an ``items`` dict in place (the converted tool keeps the same object)."""
    if isinstance(items, dict) and "type" in items:
        items["type"] = _map_type(items["type"])
    if isinstance(items, dict) and "properties" in items:
        items["properties"] = _nested_properties(items["properties"])


def _top_level_property(spec: dict[str, Any]) -> dict[str, Any]:
    """A first-level parameter keeps only type, description and (by type) items or properties."""
    info: dict[str, Any] = {"type": "string", "description": spec.get("description", "")}
    if "type" in spec:
        info["type"] = _map_type(spec["type"])
        if info["type"] == "array":
            info["items"] = {"type": "string"}
            if "items" in spec:
                info["items"] = spec["items"]
                _map_items(info["items"])
        elif info["type"] == "object":
            info["properties"] = _nested_properties(spec["properties"]) if "properties" in spec else {}
    return info


def openai_tool(doc: dict[str, Any]) -> dict[str, Any]:
    """APIRequester's conversion of one MTU-Bench tool document to an OpenAI function.

    Reproduced field by field: the name stripped with dots -> ``_``; ``parameters`` always
    ``{"type": "object", "properties": ..., "required": ...}`` with ``required`` copied as given or
    ``[]``; each first-level parameter reduced to type/description(``""`` when missing)/items/
    properties; ``default``, ``format``, ``pattern``, ``enum`` and ``response`` dropped there. The
    document is deep-copied first, so the in-place ``items`` mapping never touches the record."""
    doc = copy.deepcopy(doc)
    params = doc.get("parameters")
    function: dict[str, Any] = {
        "name": str(doc.get("name", "")).strip().replace(".", "_"),
        "description": doc.get("description"),
        "parameters": {"type": "object", "properties": {}, "required": []},
    }
    schema = function["parameters"]
    if isinstance(params, dict) and "required" in params:
        schema["required"] = params["required"]
    if isinstance(params, dict) and "properties" in params:
        properties = params["properties"]
        if isinstance(properties, list):  # list-style: [{"name", "description", ...}, ...]
            for prop in properties:
                if isinstance(prop, dict) and "name" in prop:
                    schema["properties"][str(prop["name"]).replace(".", "_")] = _top_level_property(prop)
        elif isinstance(properties, dict):
            schema["properties"] = {
                str(name).replace(".", "_"): (
                    {"type": "string", "description": spec} if isinstance(spec, str)
                    else _top_level_property(spec if isinstance(spec, dict) else {})
                )
                for name, spec in properties.items()
            }
    return {"type": "function", "function": function}


def vllm_system(model_name: str, date: str) -> str:
    line = f"Current Date: {date}"
    name = model_name.lower()
    if "qwen2.5" in name or "qwen-2.5" in name or "qwen2_5" in name:
        return f"{QWEN25_DEFAULT_SYSTEM}\n\n{line}"
    return line


def deepseek_r1_prompt(user_content: str, tools: list[dict[str, Any]], date: str) -> str:
    """``DeepSeek_R1.get_messages``: the raw documents as ``json.dumps`` lines, the query last."""
    tool_lines = "\n".join(json.dumps(tool) for tool in tools)
    return (
        f"You are a helpful Assistant.\n\nCurrent Date: {date}\n\n"
        f"You can use the following tools in json format like {_R1_FORMAT} or {_R1_FORMAT_MORE}.\n\n"
        f"{tool_lines}\n\nYou should give one or more tool calls after think\n\n"
        f"Query: {user_content}\n"
    )


def build_request_parts(
    user_content: str, tools: list[dict[str, Any]], fmt: ToolFormat, date: str, model_name: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None, dict[str, Any] | None]:
    """``(messages, tools field, extra body)`` of the tool-use request in ``fmt``."""
    if fmt == "openai":
        messages = [
            {"role": "system", "content": API_SYSTEM.format(date=date)},
            {"role": "user", "content": user_content},
        ]
        return messages, [openai_tool(t) for t in tools], None
    if fmt == "deepseek_r1":
        return [{"role": "user", "content": deepseek_r1_prompt(user_content, tools, date)}], None, None
    messages = [
        {"role": "system", "content": vllm_system(model_name, date)},
        {"role": "user", "content": user_content},
    ]
    # benchmark/evaluate_model.py (evaluate_model_for_single_round_tool_call) builds every local
    # model's SamplingParams with "skip_special_tokens": False, so special tokens the model writes
    # (Llama-3.1's <|python_tag|>) stay in the text the formatter's get_tool_call reads.
    return messages, None, {"chat_template_kwargs": {"tools": copy.deepcopy(tools)}, "skip_special_tokens": False}


def rendered_tools(tools_field: list[dict[str, Any]] | None, extra_body: dict[str, Any] | None) -> list[Any]:
    """The tool list the chat template (or the API) is given, for the case's details."""
    if tools_field is not None:
        return tools_field
    return list(((extra_body or {}).get("chat_template_kwargs") or {}).get("tools") or [])


def parse_arguments(arguments: Any) -> Any:
    if isinstance(arguments, dict):
        return arguments
    try:
        return json.loads(arguments)
    except (TypeError, ValueError, RecursionError):  # RecursionError: nested past the stack
        pass
    try:
        return ast.literal_eval(arguments)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return {}


def hermes_calls(text: str, think_vocab: bool = False) -> list[dict[str, Any]]:
    """vLLM Hermes2ProToolParser over the whole text: any failure -> no calls at all.

    ``think_vocab``: the tokenizer has ``</think>`` (QwQ, Qwen3). The parser's content is then the
    text before the first ``<tool_call>``, ``None`` when that is empty, and upstream's
    ``"</think>" in None`` raises into a bare ``except``: a reply that starts with ``<tool_call>``
    yields no calls (``BaseFormatter.get_tool_call``)."""
    text = text or ""
    if TOOL_CALL_START not in text:
        return []
    calls = []
    try:
        for closed, open_ in HERMES_RE.findall(text):
            call = json.loads(closed if closed else open_)
            if not isinstance(call["name"], str):  # vLLM's FunctionCall(name=...) refuses it
                return []
            calls.append({"name": call["name"], "parameters": call["arguments"]})
    except Exception:  # noqa: BLE001 - the parser's own `except Exception` (RecursionError included)
        return []
    if think_vocab and text.find(TOOL_CALL_START) == 0:
        return []
    return calls


def llama3_json_calls(text: str) -> list[dict[str, Any]]:
    """vLLM (0.8) ``Llama3JsonToolParser.extract_tool_calls`` as ``BaseFormatter.get_tool_call``
    reads it: any failure -> no calls at all.

    The reply must start with ``{`` or ``<|python_tag|>``; JSON values are read one after another,
    each ``raw_decode`` starting two characters (``"; "``) past the last (so whitespace or text
    there fails). Only then are the calls built, each as ``FunctionCall(name=obj["name"],
    arguments=json.dumps(obj["arguments"] if "arguments" in obj else obj["parameters"]))``: a value
    that is not an object, a missing ``name``, missing both argument keys, or a ``name`` that is not
    a string (``FunctionCall.name`` is a pydantic ``str`` field: 7, null, true, a list or an object
    raise a ValidationError) fails the whole reply, since the parser's ``except Exception`` returns
    ``tools_called=False``. ``BaseFormatter`` then parses each ``arguments`` string back
    (``safe_parse_arguments``), so ``parameters`` may be any JSON value (the metric's handling of a
    non-object is in ``scoring.tooluse_values``)."""
    text = text or ""
    if not (text.startswith(LLAMA_BOT) or text.startswith("{")):
        return []
    decoder, values = json.JSONDecoder(), []
    start = len(LLAMA_BOT) if text.startswith(LLAMA_BOT) else 0
    try:
        while start < len(text):
            value, end = decoder.raw_decode(text[start:])
            start += end + len("; ")
            values.append(value)
        calls = []
        for value in values:
            name = value["name"]
            arguments = json.dumps(value["arguments"] if "arguments" in value else value["parameters"])
            if not isinstance(name, str):  # FunctionCall(name=...) raises a ValidationError
                return []
            calls.append({"name": name, "parameters": json.loads(arguments)})
    except Exception:  # noqa: BLE001 - the parser's own `except Exception` (RecursionError included)
        return []
    return calls


def deepseek_r1_calls(text: str | None) -> list[dict[str, Any]]:
    """``DeepSeek_R1.get_tool_call``: the whole content read as arguments are read
    (``safe_parse_arguments``), a single value wrapped in a list, items without both ``name`` and
    ``parameters`` dropped (upstream's ``in`` test also passes a string holding both words; such an
    item is dropped by the metric's own dict check, so here it is dropped at once)."""
    parsed = parse_arguments(text or "")
    items = parsed if isinstance(parsed, list) else [parsed]
    return [item for item in items if isinstance(item, dict) and "name" in item and "parameters" in item]


def has_think_token(*names: str) -> bool:
    """Whether the tokenizer behind ``names`` (a served name, a local folder) has ``</think>``.

    A local folder is read (its tokenizer files name the token); otherwise the name decides: QwQ,
    Qwen3 and DeepSeek-R1 (distills included) have it, Qwen2.5 and Llama-3.1 do not."""
    for name in names:
        folder = Path(name) if name else None
        if folder is not None and folder.is_dir():
            for file in ("tokenizer.json", "tokenizer_config.json", "added_tokens.json"):
                path = folder / file
                if path.is_file() and '"</think>"' in path.read_text(encoding="utf-8", errors="replace"):
                    return True
            return False
    lowered = " ".join(names).lower().replace("_", "-")
    return any(key in lowered for key in ("qwq", "qwen3", "deepseek-r1", "r1-distill"))


def text_parser_for(family: str) -> TextParser:
    """UnifiedToolHub's model type: ``llama3.1``/``llama-3.1`` paths are Llama_3_1, the rest of the
    vLLM-served models (Qwen2.5, QwQ, Qwen3 as configured) Qwen_2_5."""
    return "llama3_json" if family.startswith("llama3") else "hermes"


def tool_sampling(fmt: ToolFormat, parser: TextParser) -> tuple[float, int, float | None]:
    """(temperature, max_tokens, top_p): UnifiedToolHub's per-type defaults (deepseek-reasoner is
    an APIRequester model, so it samples with APIRequester's)."""
    if fmt in ("openai", "deepseek_r1"):
        return 0.7, 1024, None
    if parser == "llama3_json":
        return 0.5, 512, 0.9
    return 0.7, 512, 0.8


def parse_reply(
    message: dict[str, Any],
    parser: TextParser = "hermes",
    fmt: ToolFormat = "vllm",
    *,
    api_text_tool_calls: bool = False,
    think_vocab: bool = False,
) -> list[dict[str, Any]]:
    """All calls of one assistant message as ``{"name", "parameters"}``, read as upstream's
    formatter for ``fmt`` reads them (module docstring)."""
    if fmt == "deepseek_r1":
        return deepseek_r1_calls(message.get("content"))
    structured = message.get("tool_calls") or []
    if structured:
        calls = []
        for call in structured:
            function = call.get("function") or {}
            calls.append({"name": function.get("name") or "", "parameters": parse_arguments(function.get("arguments"))})
        return calls
    if fmt == "openai" and not api_text_tool_calls:
        return []  # APIRequester.get_tool_call reads message.tool_calls only
    text = message.get("content") or ""
    return llama3_json_calls(text) if parser == "llama3_json" else hermes_calls(text, think_vocab)
