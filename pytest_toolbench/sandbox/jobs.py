"""Generic sandbox jobs: health check, and running a source string's entry point.

``run_source`` is what tests and later benchmarks use to run arbitrary untrusted Python; it turns
an exception of the untrusted code into data, so only a dying worker is a "crashed" outcome.
"""

from __future__ import annotations

import os
from typing import Any

from pytest_toolbench.sandbox.protocol import cap_text, cap_total


def ping(payload: dict) -> dict:
    return {"pid": os.getpid(), "cwd": os.getcwd()}


def run_source(payload: dict) -> dict[str, Any]:
    """payload: {"source": str, "entry": str | None, "kwargs": dict}. Execs the source in a fresh
    namespace, then calls ``entry(**kwargs)`` if given. Returns {"value"} or {"error", "type"}."""
    source, entry, kwargs = payload["source"], payload.get("entry"), payload.get("kwargs", {})  # harness bug if missing
    namespace: dict[str, Any] = {"__name__": "__sandbox__"}
    try:
        exec(compile(source, "<untrusted>", "exec", dont_inherit=True), namespace)
        value = namespace[entry](**kwargs) if entry else None
        return {"value": value, "error": None, "type": None}
    except Exception as exc:  # untrusted code failing is a result, not a sandbox failure
        return {"value": None, "error": str(exc), "type": type(exc).__name__}


# Reply checks: run by the pool, in the harness, on what a call's child sent (``<job>_reply``).
# A value of the wrong shape raises (the call fails); the returned value is capped in total.


def ping_reply(value: Any, cap: int) -> dict[str, Any]:
    if not (isinstance(value, dict) and isinstance(value.get("pid"), int) and isinstance(value.get("cwd"), str)):
        raise ValueError("expected {'pid': int, 'cwd': str}")
    return {"pid": value["pid"], "cwd": cap_text(value["cwd"], cap)}


def run_source_reply(value: Any, cap: int) -> dict[str, Any]:
    if not isinstance(value, dict) or set(value) != {"value", "error", "type"}:
        raise ValueError("expected {'value', 'error', 'type'}")
    error, kind = value["error"], value["type"]
    if not (error is None or isinstance(error, str)) or not (kind is None or isinstance(kind, str)):
        raise ValueError("'error' and 'type' must be text or null")
    return {
        "value": cap_total(value["value"], cap),
        "error": None if error is None else cap_text(error, cap),
        "type": None if kind is None else cap_text(kind, 200),
    }
