"""The reference agent for ToolHop, used by the ``oracle`` model backend as a wiring check.

Direct: answers straight from the gold. Mandatory and Free (the request carries tools): calls the
gold tool chain first, one hop per turn in hop order (gold_chain.py says where each call's
arguments come from, since the file has no gold arguments), and then answers with the gold
answer. So an oracle run goes through the tool sandbox and fills every metric (the invocation
error rates included), and still scores 100% under the upstream scorer (``code/evaluation_*.py``): the final
message is ``<answer>gold</answer>`` whatever the tools returned.

The policy is stateless over requests: the next hop is the number of tool calls already in the
conversation, so a replayed or cached conversation gets the same replies.
:meth:`ToolHopOracle.chain_report` says, per hop, what the tools really returned (the runner puts
it in the case's details), so a chain that could not be called as planned is recorded, not hidden.
"""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any

from pytest_toolbench.benchmarks.toolhop.gold_chain import GoldCall, gold_chain, reached_gold
from pytest_toolbench.benchmarks.toolhop.invocation_errors import ToolCallRecord
from pytest_toolbench.benchmarks.toolhop.schema import ToolHopRecord
from pytest_toolbench.models.base import ChatRequest


class ToolHopOracle:
    """A policy mapping a request to the next gold tool call, or to the gold answer."""

    def __init__(self, record: ToolHopRecord) -> None:
        self.record = record
        self.used = False

    @cached_property
    def chain(self) -> list[GoldCall]:
        """The gold chain, built on first use: the runner makes an oracle for every case whatever
        the model, and building the chain parses every hop's Python source (``ast.parse``), which
        was a quarter of the pytest process's CPU in runs against an endpoint that never asks it."""
        return gold_chain(self.record)

    def __call__(self, request: ChatRequest) -> dict[str, Any]:
        self.used = True
        done = sum(len(m.get("tool_calls") or []) for m in request.messages
                   if m.get("role") == "assistant")
        if request.tools and done < len(self.chain):
            call = self.chain[done]
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [{
                    "id": f"oracle-{self.record.id}-hop{call.hop}",
                    "type": "function",
                    "function": {"name": call.name,
                                 "arguments": json.dumps(call.arguments, ensure_ascii=False)},
                }],
            }
        return {"role": "assistant", "content": f"<answer>{self.record.answer}</answer>"}

    def chain_report(self, calls: list[ToolCallRecord]) -> dict[str, Any]:
        """Per hop: tool, argument source, whether the tool raised and whether its feedback holds
        the hop's gold answer; plus counts, so a run can say how much of the chain held."""
        hops = []
        names = [c.name for c in self.chain]
        for planned, made in zip(self.chain, calls):
            shadowed = planned.name in names[planned.hop + 1:]
            hops.append({
                "hop": planned.hop,
                "tool": planned.name,
                "arguments_from": planned.source,
                **({"placeholders": list(planned.placeholders)} if planned.placeholders else {}),
                # A later tool of the same name replaces this one: upstream execs every source of
                # that name and the last wins (upstream ``get_feedback`` execs every match), so this hop's tool is uncallable.
                **({"shadowed_by_later_duplicate": True} if shadowed else {}),
                "raised": made.raised,
                "reached_gold": (not made.raised) and reached_gold(made.feedback, planned.gold),
            })
        return {
            "hops": hops,
            "calls": len(hops),
            "from_example": sum(h["arguments_from"] == "example" for h in hops),
            "raised": sum(h["raised"] for h in hops),
            "reached_gold": sum(h["reached_gold"] for h in hops),
            "note": "ToolHop has no gold arguments: each call's come from the tool's own example "
                    "usage or are derived from the gold sub-answers (benchmarks/toolhop/gold_chain.py)",
        }


def toolhop_oracle(record: ToolHopRecord) -> ToolHopOracle:
    """The oracle policy of one record (see :class:`ToolHopOracle`)."""
    return ToolHopOracle(record)
