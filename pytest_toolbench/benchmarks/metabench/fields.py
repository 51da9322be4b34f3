"""The ONE place that knows how Meta-Bench files are laid out. **[INFERRED — adapt here.]**

No copy of the real Meta-Bench files could be consulted (``qinshengqian/Meta-Tool`` has a README
only), so the record layout is inferred from the paper's figures (instruction, user/assistant/tool
turns, ``{"name", "parameters"}`` calls) and its sources' formats (ToolACE, glaive). Everything
that names a raw key, a role spelling or a path convention lives in this module; when the real
files appear, adapting the loader means editing the tables and :func:`normalise_record` below,
nothing else. Two raw shapes are accepted:

* message-style (the proposed schema): ``{"id", "difficulty", "openness", "category", "tools",
  "messages": [{"role", "content", "tool_calls", "eval", "turn_kind"}], "tool_pool",
  "gold_retrieval", "system", "source"}``; a ``{"role": "system"}`` message is lifted into
  ``system`` (the pre-rendered instruction);
* ShareGPT-style (as ToolACE/LLaMA-Factory ship it): ``{"system", "conversations": [{"from",
  "value"}]}``, assistant values split on ``<|python_tag|>`` and the tail parsed as the call list.

Scenario axes missing from a record are read from its id or its file path
(``{simple,hard}/{open-world,closed-world}/{category}/...``, the layout Appendix A.8's example
names suggest). Tool turns hold the paper's entries ``[{"name", "function_id", "results"}]``
(Figs 12, 15); their keys are named here only (:data:`TOOL_RESULTS_KEY`, :func:`retrieved_tools`,
:func:`tool_result_entry`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pytest_toolbench.benchmarks.metabench.parsing import as_call, invocation_calls, split_reasoning
from pytest_toolbench.benchmarks.metabench.prompts import RETRIEVER_TOOL_NAMES

DIFFICULTIES = ("simple", "hard")
OPENNESS = ("open-world", "closed-world")
CATEGORIES = ("chat", "function_missing", "function_existing", "single_tool_call", "multi_tool_call")
#: Categories each openness allows (Meta-Tool paper).
CATEGORIES_BY_OPENNESS = {
    "open-world": ("chat", "function_missing", "function_existing"),
    "closed-world": ("chat", "single_tool_call", "multi_tool_call"),
}
#: The closed-world call category of each difficulty **[INFERRED from the Meta-Tool paper]**: the paper's "ten
#: scenarios" have one closed-world call column, "Single Tool Call" in simple (one call) and
#: "Multi Tool Call" in hard (Table 4), so simple/multi and hard/single do not exist.
CLOSED_CALL_CATEGORY = {"simple": "single_tool_call", "hard": "multi_tool_call"}

#: Keys of one entry of a tool turn (Figs 12, 15): ``{"name", "function_id", "results"}``.
TOOL_NAME_KEY = "name"
TOOL_FUNCTION_ID_KEY = "function_id"
TOOL_RESULTS_KEY = "results"

#: Raw key -> normalised key (message-style records).
RECORD_KEYS = {
    "id": "id",
    "difficulty": "difficulty",
    "openness": "openness",
    "world": "openness",
    "category": "category",
    "source": "source",
    "tools": "tools",
    "system": "system",
    "messages": "messages",
    "tool_pool": "tool_pool",
    "gold_retrieval": "gold_retrieval",
}
#: Spellings of the axes' values.
OPENNESS_ALIASES = {"open": "open-world", "closed": "closed-world", "open_world": "open-world",
                    "closed_world": "closed-world", "open-world": "open-world",
                    "closed-world": "closed-world"}
CATEGORY_ALIASES = {"fm": "function_missing", "fe": "function_existing",
                    "function-missing": "function_missing", "function-existing": "function_existing",
                    "single": "single_tool_call", "multi": "multi_tool_call"}

#: ShareGPT ``from`` -> role.
SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                  "function_call": "assistant", "tool": "tool", "observation": "tool",
                  "function": "tool", "ipython": "tool", "system": "system"}
#: Message keys the normalised schema keeps (others, e.g. OpenAI ``tool_call_id``, are dropped).
MESSAGE_KEYS = ("content", "tool_calls", "eval", "turn_kind")
MESSAGE_ROLES = {"user": "user", "assistant": "assistant", "tool": "tool", "ipython": "tool",
                 "observation": "tool", "function": "tool", "system": "system"}

_FENCED_LIST = re.compile(r"```(?:json)?\s*(\[.*?\])\s*```", re.DOTALL)


def axes_from_path(text: str) -> dict[str, str]:
    """difficulty / openness / category named by the parts of an id or a relative file path."""
    out: dict[str, str] = {}
    for part in re.split(r"[\\/]", text):
        key = part.removesuffix(".json").removesuffix(".jsonl").lower()
        if key in DIFFICULTIES:
            out["difficulty"] = key
        elif key in OPENNESS_ALIASES:
            out["openness"] = OPENNESS_ALIASES[key]
        elif key in CATEGORIES or key in CATEGORY_ALIASES:
            out["category"] = CATEGORY_ALIASES.get(key, key)
    return out


def retrieved_tools(content: Any) -> list[dict[str, Any]]:
    """Full tool JSONs in a tool turn's content: every entry's ``results`` (one tool or a list)."""
    items = content if isinstance(content, list) else [content]
    out: list[dict[str, Any]] = []
    for item in items:
        results = item.get(TOOL_RESULTS_KEY) if isinstance(item, dict) else None
        for tool in results if isinstance(results, list) else [results]:
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                out.append(tool)
    return out


def tool_result_entry(name: str, function_id: int, results: Any) -> dict[str, Any]:
    """One entry of a retriever's tool turn in the paper's format (Figs 12, 15)."""
    return {TOOL_NAME_KEY: name, TOOL_FUNCTION_ID_KEY: function_id, TOOL_RESULTS_KEY: results}


def _assistant_from_text(value: str) -> dict[str, Any]:
    reasoning, tail = split_reasoning(value)
    # A gold chat answer that shows JSON (glaive's code examples) stays a chat turn: only a real
    # invocation in the text makes it a call turn, whatever reading the run judges replies by.
    calls = invocation_calls(tail)
    if calls:
        return {"role": "assistant", "content": reasoning or None, "tool_calls": calls}
    return {"role": "assistant", "content": value}


def _tool_content(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):  # too deep: not JSON here
            return value
    return value


def _normalise_message(raw: dict[str, Any]) -> dict[str, Any]:
    role = MESSAGE_ROLES.get(str(raw.get("role", "")).lower(), raw.get("role"))
    out = {k: v for k, v in raw.items() if k in MESSAGE_KEYS}
    out["role"] = role
    if role == "assistant":
        calls = out.get("tool_calls")
        if calls:
            out["tool_calls"] = [as_call(c) or c for c in calls]
        elif isinstance(out.get("content"), str) and not out.get("tool_calls"):
            parsed = _assistant_from_text(out["content"])
            out.update({k: v for k, v in parsed.items() if k != "role"})
    elif role == "tool":
        out["content"] = _tool_content(out.get("content"))
    return out


def _sharegpt_messages(conversations: list[Any]) -> tuple[list[dict[str, Any]], str | None]:
    messages: list[dict[str, Any]] = []
    system = None
    for turn in conversations:
        if not isinstance(turn, dict):
            raise ValueError("every conversations entry must be an object with 'from' and 'value'")
        role = SHAREGPT_ROLES.get(str(turn.get("from", "")).lower())
        if role is None:
            raise ValueError(f"unknown conversation role {turn.get('from')!r}")
        value = turn.get("value")
        if role == "system":
            system = value
        elif role == "assistant" and isinstance(value, str):
            messages.append(_assistant_from_text(value))
        elif role == "tool":
            messages.append({"role": "tool", "content": _tool_content(value)})
        else:
            messages.append({"role": role, "content": value})
    return messages, system


def tools_from_system(system: str) -> list[dict[str, Any]]:
    """The tool list of a pre-rendered instruction (its fenced JSON list), retriever tools and
    ``{PLACEHOLDER}`` entries removed; [] when it cannot be read."""
    match = _FENCED_LIST.search(system)
    if match is None:
        return []
    body = re.sub(r"\{[A-Z_]+\}\s*,?", "", match.group(1))
    try:
        tools = json.loads(body)
    except (ValueError, RecursionError):  # too deep: not JSON here
        return []
    return [t for t in tools if isinstance(t, dict) and t.get("name") not in RETRIEVER_TOOL_NAMES]


def normalise_record(raw: dict[str, Any], origin: str) -> dict[str, Any]:
    """A raw record in either shape -> the normalised dict that :class:`schema.Dialogue`
    validates. ``origin`` is the file path relative to the data folder (for missing axes)."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key in RECORD_KEYS:
            out[RECORD_KEYS[key]] = value
    if "conversations" in raw:
        messages, system = _sharegpt_messages(raw["conversations"])
        out["messages"] = messages
        if system is not None and "system" not in out:
            out["system"] = system
    elif isinstance(out.get("messages"), list):
        messages = [_normalise_message(m) if isinstance(m, dict) else m for m in out["messages"]]
        systems = [m for m in messages if isinstance(m, dict) and m.get("role") == "system"]
        if systems and "system" not in out:
            out["system"] = "\n".join(str(m.get("content") or "") for m in systems)
        out["messages"] = [m for m in messages if not (isinstance(m, dict) and m.get("role") == "system")]
    if "system" in out and "tools" not in out and isinstance(out["system"], str):
        out["tools"] = tools_from_system(out["system"])
    axes = {**axes_from_path(origin), **axes_from_path(str(out.get("id", "")))}
    for key, value in axes.items():
        out.setdefault(key, value)
    if isinstance(out.get("openness"), str):
        out["openness"] = OPENNESS_ALIASES.get(out["openness"].lower(), out["openness"])
    if isinstance(out.get("category"), str):
        out["category"] = CATEGORY_ALIASES.get(out["category"].lower(), out["category"])
    return out
