"""Generic sandbox jobs: health check, and running a source string's entry point.

``run_source`` is what tests and later benchmarks use to run arbitrary untrusted Python; it turns
an exception of the untrusted code into data, so only a dying worker is a "crashed" outcome.
"""

from __future__ import annotations

import os
from typing import Any


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
