"""Upstream's open-model reply parsers, ``parse_qwen25`` and ``parse_llama31`` (ToolHop ``code/evaluation_open.py``).

ToolHop's protocol choice, provided to the model layer's open protocol
(``pytest_toolbench.models.open_protocol``) as :data:`TOOLHOP_OPEN_PARSER`, the hook a benchmark
that declares ``open_protocol = "parsed"`` hands down.

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
      upstream reads an unbound variable (``UnboundLocalError``) and the model call fails
      (``test_open`` returns None). Here that is :class:`OpenParseError`, naming the exception
      upstream's parser raised in ``upstream_exception``;
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
``requirements.txt`` pins (repository ``MananDesai54/llm-benchmarking``, commit ``61da069``). Later releases repair differently (Python
``None``/``True`` literals, non-string ``arguments``, list-shaped ``parameters``), so another
version changes which calls upstream would have run. Nothing else in the project imports it.

Recursion depth: ``json_repair`` 0.30.2 recurses once per nesting level, so whether a deeply
nested reply parses or raises ``RecursionError`` depends on how deep the parser already sits on
the stack. :func:`parse_open_reply` therefore runs the parser in a fresh worker thread at the same
frame depth as upstream's (``ThreadPoolExecutor`` worker -> ``sample_process`` ->
``sample_process_<scenario>`` -> ``test_open`` -> parser), not at whatever depth the caller has.
Both then meet the same limit as long as the recursion limit is Python's default (1000). One part of
that limit is not the stack's: ``json_repair`` first tries ``json.loads``, whose C scanner counted
each nested container against the recursion limit on the CPython 3.11 upstream ran, but not from
3.12 on. Each ``json_repair.loads`` is therefore preceded by :func:`check_nesting`, which raises
3.11's ``RecursionError`` where that ``json.loads`` raised it (:mod:`pytest_toolbench.json_nesting`),
so a reply nested about 985 levels deep reads the same on every interpreter. (Text that is not JSON
goes on to json_repair's own parser, which recurses in Python; on 3.12+ it can still reach a level
or two further than on 3.11, which also counted the C calls under it: ToolHop ledger row 26.)
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
from typing import Any, Callable, Literal

import json_repair

from pytest_toolbench.json_nesting import check_nesting, nesting_limit, on_fresh_stack
from pytest_toolbench.models.base import ModelCallError
from pytest_toolbench.models.model_families import UNKNOWN_FAMILY

log = logging.getLogger(__name__)

Series = Literal["qwen25", "llama31"]
Parser = Callable[[str, Callable[[], str]], dict[str, Any]]

QWEN_START = "<tool_call>"
QWEN_END = "</tool_call>"
LLAMA_TAG = "<|python_tag|>"

#: ``get_params(series)``: the eos ids upstream passes to ``generate`` (``code/evaluation_open.py``).
STOP_TOKEN_IDS: dict[str, tuple[int, ...]] = {
    "qwen25": (151645, 151643),
    "llama31": (128001, 128008, 128009),
}
#: Upstream's ``max_new_tokens`` for both series.
MAX_NEW_TOKENS = 1024
#: The json_repair release upstream's requirements.txt pins (and pyproject.toml pins).
UPSTREAM_JSON_REPAIR = "0.30.2"
#: Upstream's parser is this frame of its worker thread: ``threading`` (3), ``ThreadPoolExecutor``
#: (``_worker``, ``_WorkItem.run``), ``sample_process``, ``sample_process_<scenario>``,
#: ``test_open``, then the parser.
UPSTREAM_PARSER_FRAME = 9
#: The deepest text the ``json.loads`` inside ``json_repair.loads`` -> ``repair_json`` decoded on
#: 3.11, called from the parser's frame (985 levels).
JSON_REPAIR_NESTING_LIMIT = nesting_limit(UPSTREAM_PARSER_FRAME + 2)


def installed_json_repair() -> str | None:
    """The installed json_repair version (a mismatch with upstream's pin is logged at import)."""
    try:
        return importlib.metadata.version("json_repair")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a dependency
        return None


if installed_json_repair() != UPSTREAM_JSON_REPAIR:
    log.warning(
        "json_repair %s is installed; upstream's open-model parsers pin %s, and other releases "
        "repair some replies differently (pip install json-repair==%s)",
        installed_json_repair(), UPSTREAM_JSON_REPAIR, UPSTREAM_JSON_REPAIR,
    )


class OpenParseError(ModelCallError):
    """Upstream's parser raised, so its ``test_open`` returns None: the model call yields nothing.

    Not an infrastructure failure: the ToolHop runner scores it like upstream (no answer). A
    ModelCallError so that any other runner at least treats it as a failed call, never a crash.
    ``upstream_exception`` is the type name of what upstream's parser raised on this text.
    """

    def __init__(self, series: str, raw_text: str, reason: str, upstream_exception: str):
        super().__init__("unparsable_reply", f"upstream's {series} parser failed: {reason}")
        self.series = series
        self.raw_text = raw_text
        self.reason = reason
        self.upstream_exception = upstream_exception


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


# The two parsers keep upstream's statement order and call json_repair.loads / json.dumps from
# the parser's own frame, as upstream does: both recurse, so an extra frame would move the depth
# at which a deeply nested reply starts to fail.


def _append_call(out: dict[str, Any], call: Any, new_id: Callable[[], str]) -> None:
    """Both upstream parsers' append: the list is created before the entry is built, so a call
    without ``name`` leaves ``tool_calls == []`` (not None) behind it."""
    if not out["tool_calls"]:
        out["tool_calls"] = []
    out["tool_calls"].append({
        "id": new_id(),
        "type": "function",
        "function": {
            "arguments": json.dumps(call["arguments"], ensure_ascii=False),
            "name": call["name"],
        },
    })  # fmt: skip


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
            check_nesting(block, JSON_REPAIR_NESTING_LIMIT)
            call = json_repair.loads(block)
            if type(call["arguments"]) is not dict:  # noqa: E721 - upstream's exact-type test
                check_nesting(call["arguments"], JSON_REPAIR_NESTING_LIMIT)
                call["arguments"] = json_repair.loads(call["arguments"])
            _append_call(out, call, new_id)
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
            check_nesting(text.strip(), JSON_REPAIR_NESTING_LIMIT)
            json_repair.loads(text.strip())
        except Exception as exc:  # upstream: bare except, then an unbound name -> call fails
            raise OpenParseError(
                "llama31", text, f"{type(exc).__name__}: {exc}", "UnboundLocalError"
            ) from exc
        payload = text.strip()
    else:
        payload = text[start:].lstrip(LLAMA_TAG).strip()
        out["content"] = text[:start].strip()
    try:
        check_nesting(payload, JSON_REPAIR_NESTING_LIMIT)
        calls = json_repair.loads(payload)
    except Exception as exc:  # outside upstream's try: the call fails with this exception
        raise OpenParseError(
            "llama31", text, f"{type(exc).__name__}: {exc}", type(exc).__name__
        ) from exc
    if type(calls) is not list:  # noqa: E721
        calls = [calls]
    for call in calls:
        try:
            if type(call["parameters"]) is not dict:  # noqa: E721
                check_nesting(call["parameters"], JSON_REPAIR_NESTING_LIMIT)
                call["arguments"] = json_repair.loads(call["parameters"])
            else:
                call["arguments"] = call["parameters"].copy()
            _append_call(out, call, new_id)
            break  # first call only
        except Exception:  # noqa: BLE001
            continue
    if not out["tool_calls"]:
        out["content"] = text.strip()
    return out


PARSERS: dict[str, Parser] = {
    "qwen25": parse_qwen25,
    "llama31": parse_llama31,
}


def _descend(frames: int, parser: Parser, text: str, new_id: Callable[[], str]) -> dict[str, Any]:
    """Call ``parser`` ``frames`` frames further down the stack (one frame per level)."""
    if frames <= 1:
        return parser(text, new_id)
    return _descend(frames - 1, parser, text, new_id)


def parse_open_reply(series: str, text: str, new_id: Callable[[], str]) -> dict[str, Any]:
    """Parse one raw reply with the parser of ``series`` ("qwen25" or "llama31"), at upstream's
    stack depth (see the module docstring)."""
    try:
        parser = PARSERS[series]
    except KeyError:
        raise ValueError(f"no upstream parser for series {series!r}; expected {sorted(PARSERS)}") from None
    # A fresh thread (so forks inherit no idle worker): frames 1-3 are threading's, as in
    # upstream's ThreadPoolExecutor worker, frame 4 on_fresh_stack's; _descend goes on from 5.
    return on_fresh_stack(_descend, UPSTREAM_PARSER_FRAME - 5, parser, text, new_id)


#: Which of upstream ToolHop's two open-model parsers (``evaluation_open.py --series``) reads a
#: family's raw replies under the upstream open protocol (this module).
#: Upstream has only ``qwen25`` (Hermes ``<tool_call>`` blocks) and ``llama31`` (bare JSON with
#: ``parameters``). Families that emit Hermes blocks get ``qwen25``: Qwen2/Qwen3 (same format as
#: Qwen2.5), SmolLM2 and the test model (our templates show them Hermes tools), and unknown
#: models (the table assumes Hermes for them too). Llama 3.2/3.3 emit 3.1's JSON format. Mistral's
#: ``[TOOL_CALLS]`` format matches neither, so it has no upstream parser (None: vLLM's parser is
#: used and the run metadata says so).
OPEN_SERIES: dict[str, str | None] = {
    "qwen2": "qwen25",
    "qwen2.5": "qwen25",
    "qwen3": "qwen25",
    "llama3.1": "llama31",
    "llama3.2": "llama31",
    "llama3.3": "llama31",
    "mistral": None,
    "smollm2": "qwen25",
    "tiny-random-llama": "qwen25",
    UNKNOWN_FAMILY: "qwen25",
}


def open_series(family: str) -> str | None:
    """Upstream parser series for ``family`` (see :data:`OPEN_SERIES`); unknown names: qwen25."""
    return OPEN_SERIES.get(family, OPEN_SERIES[UNKNOWN_FAMILY])


class ToolHopOpenParser:
    """ToolHop's upstream parsers as the model layer's ``OpenReplyParser`` hook: which series reads
    a family's replies, the stop ids upstream generates with, and the parse itself."""

    def series_for(self, family: str) -> str | None:
        return open_series(family)

    def stop_token_ids(self, family: str, series: str) -> tuple[int, ...] | None:
        """``get_params(series)``'s eos ids, only where the tokenizer is known to be the one
        upstream's ids belong to (the official Qwen2.5 / Llama-3.1 checkpoints)."""
        return STOP_TOKEN_IDS[series] if family in ("qwen2.5", "llama3.1") else None

    def parse(self, series: str, text: str, call_seed: str) -> dict[str, Any]:
        """The assistant message upstream's parser makes of ``text``; call ids from ``call_seed``."""
        return parse_open_reply(series, text, deterministic_ids(call_seed))


TOOLHOP_OPEN_PARSER = ToolHopOpenParser()
