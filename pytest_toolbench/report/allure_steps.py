"""A case's conversation as Allure steps: one step per turn, one nested step per tool call.

Generic over every benchmark: all four keep their transcript in OpenAI chat format
(``role``/``content``/``tool_calls``/``tool_call_id``), so nothing here knows a benchmark. Bodies
are attached as readable text (JSON pretty-printed with real newlines and non-ASCII kept), never
as an escaped JSON string, because a person reads them in the report.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import allure
from allure_commons.types import AttachmentType

from pytest_toolbench.counting import counted
from pytest_toolbench.results.safe_text import safe_text

#: Longest step title; the full text is always in the step's attachment.
TITLE_CHARS = 120


def readable(value: Any) -> str:
    """Text a person can read: a string that holds JSON is decoded and pretty-printed first."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "[", '"'):
            try:
                value = json.loads(stripped)
            except (ValueError, RecursionError):
                return value
        else:
            return value
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _content_text(content: Any) -> str:
    """OpenAI content is a string or a list of parts ({"type": "text", "text": ...})."""
    if content is None:
        return ""
    if isinstance(content, list):
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in content]
        return "\n".join(x for x in parts if x)
    return str(content)


def _short(text: str, limit: int = TITLE_CHARS) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _call_signature(name: Any, arguments: Any) -> str:
    args = arguments
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except (ValueError, RecursionError):
            return f"{name}({_short(args, 80)})"
    if isinstance(args, dict):
        inner = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in args.items())
        return f"{name}({_short(inner, 100)})"
    return f"{name}({_short(json.dumps(args, ensure_ascii=False, default=str), 80)})"


@dataclass(frozen=True)
class PlannedStep:
    """A step of a case's Allure page as plain data, escaped: its title, its attachments
    (body, name, AttachmentType) and its own steps. One plan, two writers: :func:`emit_steps`
    under the running test, :func:`step_results` for a result written after the run
    (``toolbench finish --alluredir``), so a restored case shows the page the live one did."""

    title: str
    attachments: tuple[tuple[str, str, Any], ...] = ()
    steps: tuple[PlannedStep, ...] = ()


def conversation_plan(transcript: list[dict[str, Any]]) -> list[PlannedStep]:
    """The step tree for a transcript: titles and bodies are the model's and the tools' text,
    escaped (results/safe_text.py).

    Each message is a turn; an assistant turn's tool calls are its steps, each with its
    arguments and the matching tool message's content as result. A tool message that answers a
    known call is shown inside that call, not again as a turn of its own.
    """
    def text(body: str) -> str:
        return safe_text(body, multiline=True)

    results: dict[str, Any] = {}
    for msg in transcript:
        if msg.get("role") == "tool" and msg.get("tool_call_id") is not None:
            results[str(msg["tool_call_id"])] = msg.get("content")
    matched: set[str] = set()
    plan: list[PlannedStep] = []
    for i, msg in enumerate(transcript, start=1):
        role = str(msg.get("role", "?"))
        body = _content_text(msg.get("content"))
        if role == "tool" and str(msg.get("tool_call_id")) in matched:
            continue
        calls = msg.get("tool_calls") or []
        title = f"turn {i} · {role}"
        if body:
            title += f": {_short(body)}"
        elif calls:
            title += f": {counted(len(calls), 'tool call')}"
        call_steps = []
        for call in calls:
            fn = call.get("function") or {}
            call_id = call.get("id")
            answered = call_id is not None and str(call_id) in results
            if answered:
                matched.add(str(call_id))
            result = (text(readable(results[str(call_id)])) if answered
                      else "(no tool message answered this call)")
            call_steps.append(PlannedStep(
                safe_text(f"tool call {_call_signature(fn.get('name'), fn.get('arguments'))}"),
                ((text(readable(fn.get("arguments"))), "arguments", AttachmentType.TEXT),
                 (result, "result", AttachmentType.TEXT))))
        message = ((text(body), "message", AttachmentType.TEXT),) if body else ()
        plan.append(PlannedStep(safe_text(title), message, tuple(call_steps)))
    return plan


def emit_steps(plan: list[PlannedStep] | tuple[PlannedStep, ...]) -> None:
    """Write the steps under the running test (a no-op without Allure)."""
    for step in plan:
        with allure.step(step.title):
            for body, name, kind in step.attachments:
                allure.attach(body, name, kind)
            emit_steps(step.steps)


def step_results(plan: list[PlannedStep] | tuple[PlannedStep, ...],
                 attach: Callable[[str, str, Any], Any], start: int, stop: int) -> list[Any]:
    """The steps as Allure step results of a result written outside a test, each passed and
    spanning ``start``-``stop`` (ms); ``attach(body, name, kind)`` writes an attachment's file
    and returns its ``Attachment``."""
    from allure_commons.model2 import TestStepResult

    return [TestStepResult(name=step.title, status="passed", start=start, stop=stop,
                           attachments=[attach(*a) for a in step.attachments],
                           steps=step_results(step.steps, attach, start, stop))
            for step in plan]
