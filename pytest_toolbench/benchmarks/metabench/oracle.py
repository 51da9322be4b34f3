"""The reference policy for Meta-Bench: at each judged turn it answers the gold turn.

Call and meta_tool turns: the gold call list as the bare JSON list the instruction asks for (the
keyword baseline turns gold meta_tool calls into ToolSearcher calls). Chat turns: the gold text
(prose, i.e. abstention). With ``--model oracle`` T-Acc, P-Acc, IRR and FMD are 100 by
construction, and HR@k measures the retriever alone on the gold meta_tool queries.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from pytest_toolbench.benchmarks.metabench.conversation import gold_calls
from pytest_toolbench.benchmarks.metabench.schema import Dialogue
from pytest_toolbench.models.base import ChatRequest


def gold_reply(dialogue: Dialogue, turn: int, retriever: str = "meta_tool") -> dict[str, Any]:
    message = dialogue.messages[turn]
    if message.tool_calls:
        content = json.dumps(gold_calls(message, retriever), ensure_ascii=False)
    else:
        content = message.content if isinstance(message.content, str) else ""
    return {"role": "assistant", "content": content}


def metabench_oracle(dialogue: Dialogue, turn: int, retriever: str = "meta_tool") -> Callable[[ChatRequest], dict[str, Any]]:
    reply = gold_reply(dialogue, turn, retriever)

    def policy(request: ChatRequest) -> dict[str, Any]:
        return dict(reply)

    return policy
