"""The reference agent for ToolHop: answers straight from the gold, in every scenario.

Used by the ``oracle`` model backend to check the whole pipeline end to end: if the harness is
wired correctly, this policy scores 100% under the upstream scorer (spec §3.1) on every record.
"""

from __future__ import annotations

from typing import Any, Callable

from pytest_toolbench.benchmarks.toolhop.schema import ToolHopRecord
from pytest_toolbench.models.base import ChatRequest


def toolhop_oracle(record: ToolHopRecord) -> Callable[[ChatRequest], dict[str, Any]]:
    """A policy mapping any request to the gold answer in the format the prompt asks for."""
    message = {"role": "assistant", "content": f"<answer>{record.answer}</answer>"}

    def policy(request: ChatRequest) -> dict[str, Any]:
        return dict(message)

    return policy
