"""``--record PATH``: keep every assistant message a case received, in order, for later replay.

Recording wraps the model rather than reading transcripts, so it captures exactly what the model
returned whatever a benchmark chooses to keep in its transcript.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from pytest_toolbench.models.base import CallContext, ChatModel, ChatRequest, ChatResponse
from pytest_toolbench.models.replay import append_recording


class RecordingModel:
    def __init__(self, inner: ChatModel, path: Path):
        self.inner = inner
        self.name = inner.name
        self.path = path
        self._responses: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._finish_reasons: dict[str, list[str | None]] = defaultdict(list)

    async def complete(self, request: ChatRequest, ctx: CallContext) -> ChatResponse:
        response = await self.inner.complete(request, ctx)
        self._responses[ctx.case_id].append(response.message)
        self._finish_reasons[ctx.case_id].append(response.finish_reason)
        return response

    def finish_case(self, case_id: str) -> None:
        append_recording(self.path, case_id, self._responses.pop(case_id, []),
                         self._finish_reasons.pop(case_id, []))

    async def aclose(self) -> None:
        await self.inner.aclose()

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "recording_to": str(self.path)}

    def __getattr__(self, item: str) -> Any:  # stats, cache counters... of the wrapped model
        return getattr(self.inner, item)
