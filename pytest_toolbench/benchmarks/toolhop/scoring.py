"""Answer correctness for ToolHop.

``upstream_answer_correct`` is upstream's ``code/evaluation_*.py`` scoring to the letter, quirks included, because the paper's
numbers were produced with it: the gold goes through ``rstrip('.0')`` (a *character set*, so "10"
becomes "1" and "0" becomes "", which matches anything), the test is a case-insensitive substring
test over the whole final assistant message (no ``<answer>`` extraction), commas are removed from
the prediction only, and the last tool result counts too. ``None`` means upstream would not set
``answer_correct`` at all (the conversation did not end on an assistant message with content).

``strict_answer_correct`` is NOT upstream: a labelled alternative for users who want an exact
match on the ``<answer>`` tag.
"""

from __future__ import annotations

import re
from typing import Any

ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)


def _text(content: Any) -> str:
    """Message content as text (OpenAI content may be a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def final_assistant_content(messages: list[dict[str, Any]]) -> str | None:
    """The content upstream scores, or None when it would not score (no final answer)."""
    if not messages:
        return None
    last = messages[-1]
    if last.get("role") != "assistant":
        return None
    content = _text(last.get("content"))
    return content or None


def upstream_answer_correct(messages: list[dict[str, Any]], gold: str) -> bool | None:
    """Upstream's ``answer_correct`` test (``code/evaluation_*.py``) exactly. None = upstream leaves
    ``answer_correct`` unset (counted wrong in /995)."""
    content = final_assistant_content(messages)
    if content is None:
        return None
    g = gold.rstrip(".0").lower()

    def norm(s: str) -> str:
        return s.rstrip(".0").replace(",", "").lower()

    if g in norm(content):
        return True
    if len(messages) >= 2:
        prev = messages[-2]
        if prev.get("role") == "tool" and g in norm(_text(prev.get("content"))):
            return True
    return False


def extract_answer_tag(content: str) -> str | None:
    """The text inside the last ``<answer>...</answer>``, or None if there is no tag."""
    found = ANSWER_TAG.findall(content)
    return found[-1] if found else None


def normalize_strict(text: str) -> str:
    """strip, lowercase, collapse whitespace, drop one trailing period."""
    text = " ".join(text.strip().lower().split())
    return text[:-1].rstrip() if text.endswith(".") else text


def strict_answer_correct(messages: list[dict[str, Any]], gold: str) -> bool | None:
    """NOT upstream: exact match of the normalised last ``<answer>`` tag against the gold.

    None when there is no final answer (same rule as upstream); False when the final message
    has no ``<answer>`` tag.
    """
    content = final_assistant_content(messages)
    if content is None:
        return None
    tagged = extract_answer_tag(content)
    if tagged is None:
        return False
    return normalize_strict(tagged) == normalize_strict(gold)


#: How upstream's accuracy treats a sample without ``answer_correct`` (``code/evaluation_*.py``).
COUNTED_WRONG = "counted wrong by its fixed /995 denominator"


def no_answer_reason(
    messages: list[dict[str, Any]], turn: int, stop_reason: str | None = None
) -> str:
    """Why a case has no final answer, and what upstream does with it (for the failure message).

    * The model call failed (context overflow, upstream's own parser raised): upstream's call
      returns None and, its turns spent on the same failure, the sample is never written.
    * The last reply has neither content nor a tool call (``""``/None content; no calls, or the
      empty list ``parse_qwen25`` leaves when a block fails on ``name``): upstream's loop ends on
      it like on any reply without calls, and its scorer skips it because the content is falsy.
    * Otherwise the turns ran out: the conversation ends on tool messages (or on the prompt when
      every turn was lost).
    """
    if stop_reason:
        return f"no answer (turn {turn}: {stop_reason}; upstream's call yields nothing and the " \
            f"sample is never written, {COUNTED_WRONG})"
    last_role = messages[-1].get("role") if messages else None
    if last_role == "assistant":
        return f"no answer (turn {turn}: the reply has neither content nor a tool call; upstream " \
            f"ends the loop on it and sets no answer_correct, {COUNTED_WRONG})"
    return f"no answer (ran out of turns: the conversation ends on a {last_role} message at turn " \
        f"{turn}; upstream sets no answer_correct, {COUNTED_WRONG})"
