"""The toolbox benchmark's tools, run in the harness's sandbox as jobs of this module.

Declared in ``ToolboxBenchmark.sandbox_modules``: the sandbox's zygotes import this module before
any call, and each call of ``toolbox_tools:call`` runs in a fresh, confined child. Stdlib only,
since it is imported into every zygote. The reply says where it ran (the call's own directory,
this file), so a test can tell a sandboxed run from one in the harness.
"""

from __future__ import annotations

import json
import os
from typing import Any


def add(a: float, b: float) -> float:
    return a + b


def multiply(a: float, b: float) -> float:
    return a * b


TOOLS = {"add": add, "multiply": multiply}


def call(payload: dict[str, Any]) -> dict[str, Any]:
    """payload: {"name": str, "arguments": JSON text}. A wrong name or arguments is the tool's
    answer (an error text the model sees), not a failed call."""
    where = {"cwd": os.getcwd(), "pid": os.getpid(), "module": __file__}
    try:
        func = TOOLS[payload["name"]]
        result = func(**json.loads(payload["arguments"] or "{}"))
    except Exception as exc:  # the model's bad call is data for the next turn
        return {"content": f"error: {type(exc).__name__}: {exc}", "error": True, "where": where}
    text = str(int(result)) if float(result).is_integer() else str(result)
    return {"content": text, "error": False, "where": where}


def call_reply(value: Any, cap: int) -> dict[str, Any]:
    """Run by the pool in the harness on what the call's child sent: the shape, capped."""
    if not (isinstance(value, dict) and isinstance(value.get("content"), str)
            and isinstance(value.get("error"), bool) and isinstance(value.get("where"), dict)):
        raise ValueError("expected {'content': str, 'error': bool, 'where': dict}")
    where = {k: value["where"].get(k) for k in ("cwd", "pid", "module")}
    return {"content": value["content"][:cap] if cap > 0 else value["content"],
            "error": value["error"], "where": where}
