"""The benchmark's reference policy as a model: checks runners, tools and scoring end to end.

A run with ``--model oracle`` should score (near) perfectly; anything less points at the harness,
not at a model. The policy itself comes from the benchmark through ``CallContext.oracle``.
"""

from __future__ import annotations

from typing import Any

from pytest_toolbench.models.base import CallContext, ChatRequest, ChatResponse, ModelCallError
from pytest_toolbench.models.parse_check import detect_parse_failure


class OracleModel:
    name = "oracle"

    async def complete(self, request: ChatRequest, ctx: CallContext) -> ChatResponse:
        if ctx.oracle is None:
            raise ModelCallError(
                "oracle_unavailable",
                f"case {ctx.case_id}: this benchmark/scenario provides no oracle policy",
            )
        message = ctx.oracle(request)
        return ChatResponse(
            message=message, model=self.name, parse_failure=detect_parse_failure(message)
        )

    async def aclose(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"backend": "oracle", "model": self.name, "base_url": None}
