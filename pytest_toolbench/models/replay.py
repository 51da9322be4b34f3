"""``--model replay:PATH`` and ``--record PATH``: rerun scoring on saved model replies.

A recording is JSONL, one line per case: ``{"case_id": ..., "responses": [assistant messages in
order]}``, with ``"finish_reasons": [...]`` beside them (one per reply, null where the endpoint gave
none) when any reply had one, so a replayed reply keeps its ``finish_reason``. Replaying needs no endpoint, so scoring changes can be checked on real replies quickly and
deterministically. Running out of recorded replies is an infrastructure error (the recording does
not match the run), never a wrong answer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.lazy_import import LazyModule
from pytest_toolbench.models.base import CallContext, ChatRequest, ChatResponse, ModelCallError
from pytest_toolbench.models.parse_check import detect_parse_failure

if TYPE_CHECKING:
    import filelock
else:
    filelock = LazyModule("filelock")  # ~25 ms: only where a run records replies


class ReplayFormatError(ValueError):
    """A recording line that is not a valid record; the message names file and line."""


class ReplayRecord(DeferredModel):
    case_id: str
    responses: list[dict[str, Any]]
    #: Optional (older recordings have none): the replies' finish reasons, in the same order.
    finish_reasons: list[str | None] = []


def load_records(path: Path) -> dict[str, ReplayRecord]:
    """case_id -> its record (replies and their finish reasons); the latest line wins."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ReplayFormatError(f"cannot read replay file {path}: {exc}") from exc
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:  # a binary or mis-encoded file: where, not just what
        number = data.count(b"\n", 0, exc.start) + 1
        raise ReplayFormatError(f"{path}:{number}: not UTF-8 text (byte {exc.start}: "
                                f"{exc.reason}); a replay file is what --record wrote") from None
    cases: dict[str, ReplayRecord] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = ReplayRecord.model_validate_json(line)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "json"
            raise ReplayFormatError(
                f"{path}:{number}: invalid replay record ({where}: {first['msg']}); expected "
                '{"case_id": str, "responses": [assistant message objects]}'
            ) from exc
        cases[record.case_id] = record
    return cases


class ReplayModel:
    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.name = f"replay:{self.path}"
        self._cases = load_records(self.path)

    async def complete(self, request: ChatRequest, ctx: CallContext) -> ChatResponse:
        record = self._cases.get(ctx.case_id)
        if record is None:
            raise ModelCallError(
                "replay_missing_case", f"{self.path} has no recording for case {ctx.case_id}"
            )
        responses, reasons = record.responses, record.finish_reasons
        if ctx.turn >= len(responses):
            raise ModelCallError(
                "replay_exhausted",
                f"{self.path}: case {ctx.case_id} has {len(responses)} recorded replies, "
                f"the run asked for reply #{ctx.turn + 1}",
            )
        message = responses[ctx.turn]
        return ChatResponse(
            message=message, model=self.name, parse_failure=detect_parse_failure(message),
            finish_reason=reasons[ctx.turn] if ctx.turn < len(reasons) else None,
        )

    async def aclose(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"backend": "replay", "model": self.name, "base_url": None,
                "replay_path": str(self.path), "replay_cases": len(self._cases)}


def append_recording(path: Path | str, case_id: str, responses: list[dict[str, Any]],
                     finish_reasons: list[str | None] | None = None) -> None:
    """Append one case's replies; a file lock keeps lines whole when many processes record."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"case_id": case_id, "responses": responses}
    if finish_reasons and any(finish_reasons):
        record["finish_reasons"] = finish_reasons
    line = json.dumps(record, ensure_ascii=False)
    with filelock.FileLock(str(path) + ".lock"):
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())
