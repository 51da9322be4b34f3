"""Upstream's open-model reply parsers, ``parse_qwen25`` and ``parse_llama31`` (ToolHop spec §4).

ToolHop's ``evaluation_open.py`` does not use a server-side tool parser. It renders the chat
template with the tools, generates greedily, decodes with ``skip_special_tokens=True`` and hands
the raw text to one of two hand-written parsers. These functions do the same thing, quirks
included, so that a reply upstream repairs and runs is repaired and run here too:

``qwen25`` (Hermes ``<tool_call>`` format)
    * no ``<tool_call>``: the content is the stripped text and there are no tool calls;
    * otherwise the content is the stripped text before the first marker, or ``None`` when the
      text starts with the marker (so ``"\\n<tool_call>..."`` gives ``""``, not ``None``);
    * the rest is ``lstrip``-ed with the *character set* of ``"<tool_call>"`` and split on
      ``</tool_call>``. Each non-blank block is read with ``json_repair`` (a block that still
      begins with ``<tool_call>`` loses it first). ``arguments`` that are not a dict are read
      with ``json_repair`` again. Each call is re-serialised with
      ``json.dumps(..., ensure_ascii=False)``;
    * any block that fails (no ``name``/``arguments``, not an object...) is dropped silently;
    * if a block fails on ``name`` after the list was created, ``tool_calls`` stays ``[]``
      (falsy, so it counts as "no calls" in the turn loop).

``llama31`` (JSON ``{"name", "parameters"}``; ``<|python_tag|>`` is usually stripped by
``skip_special_tokens``)
    * without the tag the whole stripped text is tried with ``json_repair``. If that raises,
      upstream reads an unbound variable and the model call fails (``test_open`` returns None).
      Here that is :class:`OpenParseError`;
    * with the tag, the text after it (char-set ``lstrip`` of the tag, then ``strip``) is parsed
      and the content is the stripped text before it;
    * a non-list result is wrapped in a list. **Only the first** element that has ``name`` and
      ``parameters`` becomes a call (no parallel calls);
    * with no call, the content is the whole stripped text (``tool_calls`` None, or ``[]`` in the
      same corner case as qwen25).

The assistant message is upstream's shape: ``{"role", "content", "tool_calls": list | None}``.

Deviation (documented in the README): upstream's call id is ``"call_" + sha256(str(now))``, which
changes from run to run (and can repeat for parallel calls made in the same microsecond). Here
``new_id`` supplies a deterministic id, so requests stay cacheable. The id only pairs tool
messages with calls; neither upstream template shows it to the model.

``json_repair`` is pinned to 0.30.2 in pyproject.toml, the version upstream's
``requirements.txt`` pins (spec S1, commit ``61da069``). Later releases repair differently (Python
``None``/``True`` literals, non-string ``arguments``, list-shaped ``parameters``), so another
version changes which calls upstream would have run. Nothing else in the project imports it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Literal

import json_repair

from pytest_toolbench.models.base import ModelCallError

Series = Literal["qwen25", "llama31"]

QWEN_START = "<tool_call>"
QWEN_END = "</tool_call>"
LLAMA_TAG = "<|python_tag|>"

#: ``get_params(series)``: the eos ids upstream passes to ``generate`` (spec §2.4).
STOP_TOKEN_IDS: dict[str, tuple[int, ...]] = {
    "qwen25": (151645, 151643),
    "llama31": (128001, 128008, 128009),
}
#: Upstream's ``max_new_tokens`` for both series.
MAX_NEW_TOKENS = 1024


class OpenParseError(ModelCallError):
    """Upstream's parser raised, so its ``test_open`` returns None: the model call yields nothing.

    Not an infrastructure failure: the ToolHop runner scores it like upstream (no answer). A
    ModelCallError so that any other runner at least treats it as a failed call, never a crash.
    """

    def __init__(self, series: str, raw_text: str, reason: str):
        super().__init__("unparsable_reply", f"upstream's {series} parser failed: {reason}")
        self.series = series
        self.raw_text = raw_text
        self.reason = reason


def deterministic_ids(seed: str) -> Callable[[], str]:
    """``call_<sha256>`` ids in upstream's format, from ``seed`` and a counter (not the clock)."""
    counter = 0

    def new_id() -> str:
        nonlocal counter
        digest = hashlib.sha256(f"{seed}#{counter}".encode()).hexdigest()
        counter += 1
        return "call_" + digest

    return new_id


def _message() -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": None}


def _append_call(
    out: dict[str, Any], call: Any, arguments: Any, new_id: Callable[[], str]
) -> None:
    """Upstream creates the list first, then builds the entry: a missing ``name`` leaves ``[]``."""
    if not out["tool_calls"]:
        out["tool_calls"] = []
    entry = {
        "id": new_id(),
        "type": "function",
        "function": {
            "arguments": json.dumps(arguments, ensure_ascii=False),
            "name": call["name"],
        },
    }
    out["tool_calls"].append(entry)


def parse_qwen25(text: str, new_id: Callable[[], str]) -> dict[str, Any]:
    """Upstream's ``parse_qwen25`` (see the module docstring). Never raises."""
    out = _message()
    start = text.find(QWEN_START)
    if start == -1:
        out["content"] = text.strip()
        return out
    out["content"] = text[:start].strip() if start != 0 else None
    rest = text[start:].lstrip(QWEN_START)  # a character-set strip, as upstream
    for block in rest.split(QWEN_END):
        if not block.strip():
            continue
        try:
            if block.strip().startswith(QWEN_START):
                block = block.strip().lstrip(QWEN_START).strip()
            call = json_repair.loads(block)
            arguments = call["arguments"]
            if type(arguments) is not dict:  # noqa: E721 - upstream's exact-type test
                arguments = json_repair.loads(arguments)
            _append_call(out, call, arguments, new_id)
        except Exception:  # noqa: BLE001 - upstream drops a failed block and goes on
            continue
    return out


def parse_llama31(text: str, new_id: Callable[[], str]) -> dict[str, Any]:
    """Upstream's ``parse_llama31`` (see the module docstring); :class:`OpenParseError` where
    upstream's own parser raises."""
    out = _message()
    start = text.find(LLAMA_TAG)
    if start == -1:
        try:
            json_repair.loads(text.strip())
        except Exception as exc:  # upstream: bare except, then an unbound name -> call fails
            raise OpenParseError("llama31", text, f"{type(exc).__name__}: {exc}") from exc
        payload = text.strip()
    else:
        payload = text[start:].lstrip(LLAMA_TAG).strip()
        out["content"] = text[:start].strip()
    try:
        calls = json_repair.loads(payload)
    except Exception as exc:  # outside upstream's try: the call fails
        raise OpenParseError("llama31", text, f"{type(exc).__name__}: {exc}") from exc
    if type(calls) is not list:  # noqa: E721
        calls = [calls]
    for call in calls:
        try:
            parameters = call["parameters"]
            if type(parameters) is not dict:  # noqa: E721
                arguments = json_repair.loads(parameters)
            else:
                arguments = parameters.copy()
            _append_call(out, call, arguments, new_id)
            break  # first call only
        except Exception:  # noqa: BLE001
            continue
    if not out["tool_calls"]:
        out["content"] = text.strip()
    return out


PARSERS: dict[str, Callable[[str, Callable[[], str]], dict[str, Any]]] = {
    "qwen25": parse_qwen25,
    "llama31": parse_llama31,
}


def parse_open_reply(series: str, text: str, new_id: Callable[[], str]) -> dict[str, Any]:
    """Parse one raw reply with the parser of ``series`` ("qwen25" or "llama31")."""
    try:
        parser = PARSERS[series]
    except KeyError:
        raise ValueError(f"no upstream parser for series {series!r}; expected {sorted(PARSERS)}") from None
    return parser(text, new_id)
