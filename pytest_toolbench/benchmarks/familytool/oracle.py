"""The reference policy: extraction answered with ``KG.search`` calls that reproduce the golden
links, tool use answered with the golden call (OpenAI ``tool_calls``).

Golden links are speaker-first chains, sometimes branched; the oracle does not need the chains
(see :func:`oracle_calls`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Callable

from pytest_toolbench.benchmarks.familytool.schema import FamilyToolRecord
from pytest_toolbench.models.base import ChatRequest


def _call(start: str, relations: Sequence[str]) -> str:
    path = ",".join(f'"<relationship>{r}"' for r in relations)
    return f'KG.search(start="{start}", path=[{path}])'


def oracle_calls(links: Sequence[Sequence[str]]) -> list[str]:
    """One call per distinct golden link: ``start=head, path=[relation]``. A head that upstream's
    space deletion would break (``Mr. Smith``) is reached from the link that leads to it instead:
    ``start=Bob, path=[teacher, relation]``.

    Why not one call per chain: Relation Retrieval tests every hop against the ORIGINAL start
    entity (upstream bug in ``relation_retrieval``), so a chain whose start lacks a later relation skips that hop
    and walks on from the wrong entity. Single-hop calls (and the two-hop calls from the teacher's
    pupil, who has the same preference relations) give the golden set under both GS and RR."""
    distinct = list(dict.fromkeys(tuple(link) for link in links))
    calls = []
    for link in distinct:
        if " " not in link[0]:
            calls.append(_call(link[0], [link[1]]))
            continue
        parent = next((l for l in distinct if l[-1] == link[0] and " " not in l[0]), None)
        if parent is not None:
            calls.append(_call(parent[0], [parent[1], link[1]]))
    return list(dict.fromkeys(calls))


def kg_search_text(links: Sequence[Sequence[str]]) -> str:
    return "```python\n" + "\n".join(oracle_calls(links)) + "\n```"


def golden_tool_message(record: FamilyToolRecord) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["parameters"], ensure_ascii=False)},
            }
            for i, call in enumerate(record.golden_calls)
        ],
    }


def _is_deepseek_r1_prompt(request: ChatRequest) -> bool:
    content = request.messages[-1].get("content") if request.messages else None
    return isinstance(content, str) and content.startswith("You are a helpful Assistant.\n\nCurrent Date:")


def familytool_oracle(record: FamilyToolRecord) -> Callable[[ChatRequest], dict[str, Any]]:
    """Tool-use requests get the golden call in their format's reply (``tool_calls``; JSON text for
    the deepseek-reasoner prompt); the extraction request gets the KG.search calls."""

    def policy(request: ChatRequest) -> dict[str, Any]:
        template_tools = ((request.extra_body or {}).get("chat_template_kwargs") or {}).get("tools")
        if request.tools or template_tools:
            return golden_tool_message(record)
        if _is_deepseek_r1_prompt(request):
            return {"role": "assistant", "content": json.dumps(record.golden_calls, ensure_ascii=False)}
        return {"role": "assistant", "content": kg_search_text(record.golden_links)}

    return policy
