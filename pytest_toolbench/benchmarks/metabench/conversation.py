"""The request for one judged turn: instruction + ground-truth history up to that turn (turn-level
teacher forcing, Meta-Tool paper), in OpenAI message format."""

from __future__ import annotations

import json
from typing import Any

from pytest_toolbench.benchmarks.metabench.fields import TOOL_NAME_KEY, TOOL_RESULTS_KEY
from pytest_toolbench.benchmarks.metabench.options import MetaBenchOptions
from pytest_toolbench.benchmarks.metabench.prompts import (
    META_TOOL_NAME,
    TOOLSEARCHER_NAME,
    fill_placeholders,
    instruction_tools,
    render_instruction,
)
from pytest_toolbench.benchmarks.metabench.schema import Call, Dialogue, Message


def as_keyword_call(call: Call) -> dict[str, Any]:
    """Keyword baseline **[INFERRED]**: a gold meta_tool call becomes ToolSearcher whose keywords
    are the gold tool description."""
    if call.name != META_TOOL_NAME:
        return call.as_json()
    return {"name": TOOLSEARCHER_NAME, "parameters": {"keywords": call.parameters.get("tool_description", "")}}


def gold_calls(message: Message, retriever: str) -> list[dict[str, Any]]:
    if retriever == "keyword":
        return [as_keyword_call(c) for c in message.tool_calls]
    return [c.as_json() for c in message.tool_calls]


def _tool_content(content: Any, retriever: str) -> Any:
    if retriever != "keyword" or not isinstance(content, list):
        return content
    out = []
    for item in content:
        if isinstance(item, dict) and item.get(TOOL_NAME_KEY) == META_TOOL_NAME:
            results = item.get(TOOL_RESULTS_KEY)
            item = {**item, TOOL_NAME_KEY: TOOLSEARCHER_NAME,
                    TOOL_RESULTS_KEY: {"best_matches": results if isinstance(results, list) else [results]}}
        out.append(item)
    return out


def _text(content: Any) -> str:
    if content is None:
        return ""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def system_message(dialogue: Dialogue, options: MetaBenchOptions) -> dict[str, Any]:
    if dialogue.system:
        text = fill_placeholders(dialogue.system, options.retriever, options.tool_indent)
    else:
        tools = instruction_tools(
            dialogue.tools,
            open_world=dialogue.openness == "open-world",
            retriever=options.retriever,
            list_get_user_input=options.list_get_user_input,
        )
        text = render_instruction(tools, options.tool_indent)
    return {"role": "system", "content": text}


def history(dialogue: Dialogue, turn: int, options: MetaBenchOptions) -> list[dict[str, Any]]:
    """Messages ``[0, turn)`` of the dialogue in the chosen history format."""
    out: list[dict[str, Any]] = []
    pending_ids: list[str] = []
    for index, m in enumerate(dialogue.messages[:turn]):
        if m.role == "user":
            out.append({"role": "user", "content": _text(m.content)})
        elif m.role == "assistant" and not m.tool_calls:
            out.append({"role": "assistant", "content": _text(m.content)})
        elif m.role == "assistant":
            calls = gold_calls(m, options.retriever)
            if options.history_format == "text":
                out.append({"role": "assistant", "content": json.dumps(calls, ensure_ascii=False)})
            else:
                pending_ids = [f"call_{index}_{i}" for i in range(len(calls))]
                out.append({"role": "assistant", "content": None, "tool_calls": [
                    {"id": cid, "type": "function",
                     "function": {"name": c["name"], "arguments": json.dumps(c["parameters"], ensure_ascii=False)}}
                    for cid, c in zip(pending_ids, calls)
                ]})
        else:  # tool
            content = _tool_content(m.content, options.retriever)
            if options.history_format == "text" or not pending_ids:
                out.append({"role": "tool", "content": _text(content)})
            else:
                parts = content if isinstance(content, list) and len(content) == len(pending_ids) else None
                for i, cid in enumerate(pending_ids):
                    body = _text([parts[i]]) if parts else (_text(content) if i == 0 else "")
                    out.append({"role": "tool", "tool_call_id": cid, "content": body})
                pending_ids = []
    return out


def build_messages(dialogue: Dialogue, turn: int, options: MetaBenchOptions) -> list[dict[str, Any]]:
    return [system_message(dialogue, options), *history(dialogue, turn, options)]


def history_query(dialogue: Dialogue, turn: int, mode: str) -> str:
    """The dialogue-history baseline's query text **[INFERRED]**: the full history (no system,
    newest last) or the last user message."""
    messages = dialogue.messages[:turn]
    if mode == "last_user":
        users = [m for m in messages if m.role == "user"]
        return _text(users[-1].content) if users else ""
    lines = []
    for m in messages:
        body = json.dumps([c.as_json() for c in m.tool_calls], ensure_ascii=False) if m.tool_calls else _text(m.content)
        lines.append(f"{m.role}: {body}")
    return "\n".join(lines)
