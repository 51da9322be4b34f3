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
#: A text this long is written once per chunk, in its ``texts``, and referenced where it occurs.
SHARED_TEXT_CHARS = 512
#: The first character of a string value that is a reference into ``texts`` (``"\0" + index``),
#: or, doubled, of a string that really began with it (``"\0\0..."``).
TEXT_MARK = "\x00"

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


def share_texts(cases: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str] | None]:
    """A chunk's payloads with every long text replaced by a reference into the returned
    ``texts``, where each distinct one is stored once. A FamilyTool chunk repeats its knowledge
    graph and tool documents in each case's prompt (extraction and tool use): the real data's
    site took 72 MB, 48 MB with its texts shared. ``static/app.js`` (``TB.unshare``) and
    :func:`unshare_texts` undo it; dict keys are left as they are. One pass: a long text seen
    once costs its reference's few bytes. A chunk nested deeper than Python's stack allows (a
    model's arguments, 900 levels down) comes back as it was, with ``texts`` None: written whole,
    as before sharing, and read as it is."""
    texts: list[str] = []
    refs: dict[str, str] = {}

    def share(value: Any) -> Any:
        kind = type(value)
        if kind is str:
            if len(value) >= SHARED_TEXT_CHARS:
                ref = refs.get(value)
                if ref is None:
                    ref = refs[value] = f"{TEXT_MARK}{len(texts)}"
                    texts.append(value)
                return ref
            if value[:1] == TEXT_MARK:  # escaped, so no text the model wrote reads as a reference
                return TEXT_MARK + value
            return value
        if kind is dict:
            return {k: share(v) for k, v in value.items()}
        if kind is list or kind is tuple:
            return [share(v) for v in value]
        if isinstance(value, str):  # subclasses (an enum's value, an OrderedDict): as their base
            return share(str(value))
        if isinstance(value, dict):
            return share(dict(value))
        if isinstance(value, (list, tuple)):
            return share(list(value))
        return value

    try:
        return [share(case) for case in cases], texts
    except RecursionError:
        return cases, None


def unshare_texts(value: Any, texts: list[str] | None) -> Any:
    """What :func:`share_texts` took in (``static/app.js``'s ``TB.unshare``, in Python)."""
    if texts is None:  # a chunk written whole
        return value
    if isinstance(value, str):
        if not value.startswith(TEXT_MARK):
            return value
        return value[1:] if value[1:2] == TEXT_MARK else texts[int(value[1:])]
    if isinstance(value, dict):
        return {k: unshare_texts(v, texts) for k, v in value.items()}
    if isinstance(value, list):
        return [unshare_texts(v, texts) for v in value]
    return value
