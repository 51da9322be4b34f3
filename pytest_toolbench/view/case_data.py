"""What the browser gets of each case: a small index entry (list, filters, search) embedded with
the run, and the whole case (transcript, gold, values, parse failures) in per-page ``.js`` chunks
loaded only when a page of the list or a case is opened, so a 10,000-case run opens at once.

Tool results that hit a sandbox limit are marked as such: a call that timed out or crashed
(benchmarks/toolhop/runner.py feeds ``an error occured when call NAME: timed out after ...`` back
and records a ``tool_timeout``/``tool_crashed`` deviation) and output cut at
``--sandbox-output-cap`` (sandbox/protocol.py's ``…[truncated N chars]`` marks).
"""

from __future__ import annotations

import re
from typing import Any


from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.results.case_result import CaseResult

#: Cases per chunk file: one page of the list loads one chunk.
CHUNK = 50
#: Characters of a case's text kept for the search box (id, question, answers, failure).
SEARCH_CHARS = 600

_CUT = re.compile(r"…\[truncated \d+ (?:chars|items|keys)\]")
_LIMIT_FEEDBACK = re.compile(r"an error occured when call .*?: (timed out after .*|tool execution crashed .*)$",
                             re.S)


class CaseEntry(DeferredModel):
    """One row of the case list (kept small: 10,000 of them are parsed at page load)."""

    i: int
    id: str
    b: str
    s: str
    o: str
    labels: dict[str, str]
    msg: str
    text: str


def _short(v: Any, n: int = 200) -> str:
    s = v if isinstance(v, str) else ("" if v is None else str(v))
    return s if len(s) <= n else s[: n - 1] + "…"


def case_entry(i: int, c: CaseResult) -> CaseEntry:
    msg = c.error.message if c.error is not None else (c.failure_message or "")
    d = c.details
    parts = [c.case_id, msg, *(str(d.get(k, "")) for k in ("question", "gold", "prediction"))]
    return CaseEntry(i=i, id=c.case_id, b=c.benchmark, s=c.scenario, o=c.outcome.value,
                     labels={k: str(v) for k, v in c.labels.items()}, msg=_short(msg),
                     text=_short(" ".join(p for p in parts if p), SEARCH_CHARS).lower())


def sandbox_limit(content: Any) -> str | None:
    """Why a tool result is a sandbox limit, or None."""
    if not isinstance(content, str):
        return None
    m = _LIMIT_FEEDBACK.search(content)
    if m:
        return f"sandbox limit: {m.group(1).strip()}"
    if _CUT.search(content):
        return "sandbox limit: output cut at --sandbox-output-cap"
    return None


def case_payload(i: int, c: CaseResult) -> dict[str, Any]:
    """The whole case for its page; tool messages get ``limit`` when they hit a sandbox limit."""
    transcript = []
    for m in c.transcript:
        m = dict(m)
        if m.get("role") == "tool":
            why = sandbox_limit(m.get("content"))
            if why:
                m["limit"] = why
        transcript.append(m)
    return {
        "i": i, "id": c.case_id, "benchmark": c.benchmark, "scenario": c.scenario,
        "model": c.model, "outcome": c.outcome.value, "labels": c.labels, "values": c.values,
        "failure": c.failure_message, "error": c.error.model_dump() if c.error else None,
        "transcript": transcript, "parse_failures": c.parse_failures, "details": c.details,
        "usage": c.usage.model_dump(), "latency_s": c.latency_s, "wall_s": c.wall_s,
        "started_at": c.started_at, "model_calls": c.model_calls, "cached_calls": c.cached_calls,
        "repeat": c.repeat,
    }
