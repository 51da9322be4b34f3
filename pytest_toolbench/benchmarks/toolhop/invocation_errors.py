"""Invocation errors (ToolHop paper, Table 4 "Query"/"Instance"; no released code). Mandatory scenario only.

No released code computes these, so both readings of the paper's definition are offered and the
one used is recorded with the result:

* ``schema`` (default): judge each tool-call instance against the tool list the model was given.
  A name outside it is a tool hallucination (its parameters cannot be judged then); otherwise an
  argument outside ``properties`` is a parameter hallucination and a ``required`` parameter left
  out is a parameter missing. Both parameter flags may be set on one instance; it still counts
  once for the rates. Arguments that are not a JSON object are reported separately and are not an
  invocation error.
* ``feedback``: classify by the upstream error text the call produced. Only the executor's error
  path (``an error occured when call <name>: ...``) is considered; a tool hallucination needs the
  NameError to be about the called name itself, so a NameError raised *inside* a tool body
  (upstream's ``exec`` namespace quirk in ``get_feedback``, e.g. ``name 're' is not defined``) is
  not miscounted as one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pytest_toolbench.benchmarks.toolhop.feedback_nesting import FEEDBACK_NESTING_LIMIT
from pytest_toolbench.benchmarks.toolhop.schema import ToolHopRecord
from pytest_toolbench.json_nesting import loads_as_upstream

ERROR_TYPES = ("tool_hallucination", "parameter_hallucination", "parameter_missing")

_UNEXPECTED_KW = re.compile(r"got an unexpected keyword argument")
_MISSING_ARG = re.compile(r"missing \d+ required positional arguments?")


@dataclass(frozen=True)
class ToolCallRecord:
    """One tool-call instance as the runner saw it, before any feedback masking."""

    turn: int
    index: int  # position within the assistant message's tool_calls
    name: str
    arguments: str
    feedback: str  # the executor's tool-message content (unmasked)
    raised: bool  # the executor took the exception path (or the call timed out / crashed)


def parse_arguments(arguments: str) -> dict[str, Any] | None:
    """The arguments as upstream would pass them as **kwargs, or None if that would fail."""
    try:
        value = loads_as_upstream(arguments, FEEDBACK_NESTING_LIMIT)
    except (TypeError, ValueError, RecursionError):  # too deep to decode: unparseable too
        return None
    return value if isinstance(value, dict) else None


def classify_schema(record: ToolHopRecord, call: ToolCallRecord) -> dict[str, bool]:
    flags = {t: False for t in ERROR_TYPES}
    flags["unparseable_arguments"] = False
    names = set(record.tool_names)
    if call.name not in names:
        flags["tool_hallucination"] = True
        return flags
    args = parse_arguments(call.arguments)
    if args is None:
        flags["unparseable_arguments"] = True
        return flags
    schema = record.tool_schema(call.name) or {}
    properties = set((schema.get("properties") or {}).keys())
    required = set(schema.get("required") or [])
    flags["parameter_hallucination"] = bool(set(args) - properties)
    flags["parameter_missing"] = bool(required - set(args))
    return flags


def classify_feedback(call: ToolCallRecord) -> dict[str, bool]:
    flags = {t: False for t in ERROR_TYPES}
    flags["unparseable_arguments"] = parse_arguments(call.arguments) is None
    prefix = f"an error occured when call {call.name}: "
    if not call.feedback.startswith(prefix):
        return flags
    detail = call.feedback[len(prefix):]
    flags["tool_hallucination"] = detail.startswith(f"name '{call.name}' is not defined")
    flags["parameter_hallucination"] = bool(_UNEXPECTED_KW.search(detail))
    flags["parameter_missing"] = bool(_MISSING_ARG.search(detail))
    return flags


def summarize(
    record: ToolHopRecord,
    calls: list[ToolCallRecord],
    mode: Literal["schema", "feedback"] = "schema",
) -> dict[str, Any]:
    """Per-call flags, per-type counts and the three numbers the metrics aggregate."""
    per_call = []
    counts = {t: 0 for t in (*ERROR_TYPES, "unparseable_arguments")}
    error_calls = 0
    for call in calls:
        flags = classify_schema(record, call) if mode == "schema" else classify_feedback(call)
        erroneous = any(flags[t] for t in ERROR_TYPES)
        error_calls += erroneous
        for key, flagged in flags.items():
            counts[key] += flagged
        per_call.append(
            {"turn": call.turn, "index": call.index, "name": call.name, "error": erroneous, **flags}
        )
    return {
        "mode": mode,
        "calls": len(calls),
        "error_calls": error_calls,
        "query_error": error_calls > 0,
        "counts": counts,
        "per_call": per_call,
    }
