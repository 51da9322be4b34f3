"""ToolHop tool execution with upstream semantics (``get_feedback`` in ``code/evaluation_*.py``), run INSIDE a sandbox worker.

Upstream (``evaluation_closed.py`` @61da069, ``get_feedback``) does, per tool call::

    tool_args = json.loads(arguments)
    def excute_func(functions, func_name, func_args):       # nested, under func_set_timeout(10)
        for func in functions:
            if func.split('def')[1].split('(')[0].strip() == func_name:
                exec(func)                                    # no explicit dicts
        return eval(func_name)(**func_args)
    content = json.dumps(result, ensure_ascii=False)      # or, on any Exception:
    content = f"an error occured when call {name}: {str(e)}"

Under CPython <= 3.12 a dict-less ``exec`` in a function writes into the frame's locals dict, whose
``FastToLocals`` snapshot also holds ``excute_func``'s own variables; the defined tool's
``__globals__`` is the script's module namespace. We reproduce that with explicit dicts, which is
exact on every Python version (3.13's PEP 667 broke the dict-less original), and never ``eval`` the
model-chosen name: it is compiled (for the exact SyntaxError text) and looked up by dict.

Deliberate deviations (documented, see ``docs`` in the runner):
- a name that compiles but is neither an identifier nor a literal (``os.system``, ``f()``) is
  reported as ``name '<name>' is not defined`` instead of being evaluated (code injection upstream);
- the script's own functions (``main``, ``get_feedback``...) are not in the emulated globals;
- the emulated globals are a fresh copy per call (upstream shares one module across calls), and
  each call runs in a fresh fork of the sandbox zygote, so nothing a tool changes outlives it.

Not a deviation: a ``BaseException`` that is not an ``Exception`` (``SystemExit`` from a tool
named ``exit``/``quit`` or one that calls ``sys.exit``) gives the content ``null``. Upstream runs
``excute_func`` under ``func_set_timeout``, i.e. in a func_timeout thread whose wrapper catches
only ``Exception``: the thread dies, no result is stored, the wrapper returns ``None``, and
``json.dumps(None)`` is ``null`` (a success, not an error message).

Nor is the nesting at which ``json.loads(arguments)`` or ``json.dumps(result)`` gives up: upstream's
``RecursionError`` comes where CPython 3.11 raised it eight frames down upstream's worker thread,
whatever the interpreter and the sandbox's own stack depth (:mod:`pytest_toolbench.json_nesting`).
"""

from __future__ import annotations

import argparse
import ast
import builtins
import datetime
import json
import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from hashlib import sha256
from time import sleep
from typing import Any

from pytest_toolbench.benchmarks.toolhop.feedback_nesting import FEEDBACK_NESTING_LIMIT
from pytest_toolbench.json_nesting import dumps_as_upstream, loads_as_upstream
from pytest_toolbench.sandbox.protocol import cap_text

ERROR_FORMAT = "an error occured when call {name}: {error}"  # sic: "occured", upstream typo

_UNSET = object()


def _optional_globals() -> dict[str, Any]:
    """Script globals that exist upstream only if the package is installed here too."""
    found: dict[str, Any] = {}
    try:
        from tqdm import tqdm

        found["tqdm"] = tqdm
    except ImportError:
        pass
    try:
        from func_timeout import func_set_timeout

        found["func_set_timeout"] = func_set_timeout
    except ImportError:
        pass
    try:
        import requests

        found["requests"] = requests
    except ImportError:
        pass
    return found


def script_globals() -> dict[str, Any]:
    """A fresh dict mimicking ``evaluation_closed.py``'s module namespace (its imports, in order)."""
    namespace: dict[str, Any] = {
        "__name__": "__main__",
        "__doc__": None,
        "__package__": None,
        "__spec__": None,
        "__annotations__": {},
        "__builtins__": builtins,
        "argparse": argparse,
        "json": json,
        "os": os,
        "sha256": sha256,
        "datetime": datetime,
    }
    optional = _OPTIONAL
    if "tqdm" in optional:
        namespace["tqdm"] = optional["tqdm"]
    if "func_set_timeout" in optional:
        namespace["func_set_timeout"] = optional["func_set_timeout"]
    namespace.update(ThreadPoolExecutor=ThreadPoolExecutor, as_completed=as_completed, sleep=sleep)
    if "requests" in optional:
        namespace["requests"] = optional["requests"]
    return namespace


_OPTIONAL = _optional_globals()


def tool_name_of(source: str) -> str:
    """Upstream's name extraction, quirks included (IndexError if the source has no 'def')."""
    return source.split("def")[1].split("(")[0].strip()


def resolve_name(name: str, local_ns: dict[str, Any], global_ns: dict[str, Any]) -> Any:
    """What ``eval(name)`` would return, without evaluating anything the model wrote.

    ``eval`` strips leading spaces/tabs, then compiles; syntax errors keep their exact text.
    Identifiers (NFKC-normalised by the parser, as upstream) go locals -> globals -> builtins.
    """
    source = name.lstrip(" \t")
    # A full compile (never executed) so compiler-stage errors ("'yield' outside function") keep
    # upstream's text too; then the AST tells us what kind of expression it is.
    compile(source, "<string>", "eval", dont_inherit=True)
    node = ast.parse(source, mode="eval").body
    if isinstance(node, ast.Name):
        for namespace in (local_ns, global_ns, vars(global_ns["__builtins__"])):
            if node.id in namespace:
                return namespace[node.id]
        raise NameError(f"name '{node.id}' is not defined")
    try:
        return ast.literal_eval(node)  # constants are harmless to evaluate, as upstream does
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    # Deviation: anything else would be code execution upstream.
    raise NameError(f"name '{name}' is not defined")


def execute(functions: list[str], name: str, args: Any, *, clean_namespace: bool = False) -> Any:
    """``excute_func``: exec every source defining ``name`` (in order), resolve it, call it."""
    if clean_namespace:
        # __main__ as upstream, so messages naming the function (``__main__.f() argument after **``)
        # stay identical; only the import/recursion scoping differs.
        namespace: dict[str, Any] = {"__builtins__": builtins, "__name__": "__main__"}
        for func in functions:
            if tool_name_of(func) == name:
                exec(compile(func, "<string>", "exec", dont_inherit=True), namespace)
        return resolve_name(name, namespace, namespace)(**args)

    global_ns = script_globals()
    local_ns: dict[str, Any] = {}

    def fast_to_locals(current: Any) -> None:
        # CPython <= 3.12 re-syncs the frame's own variables into its locals dict on every
        # locals() snapshot (each exec/eval), in co_varnames order.
        local_ns.update(functions=functions, func_name=name, func_args=args)
        if current is not _UNSET:
            local_ns["func"] = current

    current: Any = _UNSET
    for func in functions:
        current = func
        if tool_name_of(func) == name:
            fast_to_locals(current)
            exec(compile(func, "<string>", "exec", dont_inherit=True), global_ns, local_ns)
    fast_to_locals(current)
    return resolve_name(name, local_ns, global_ns)(**args)


def tool_content(functions: list[str], name: str, arguments: str, *, clean_namespace: bool = False) -> tuple[str, BaseException | None]:
    """The tool message content exactly as upstream, and the exception if the call failed."""
    try:
        args = loads_as_upstream(arguments, FEEDBACK_NESTING_LIMIT)
    except Exception as exc:
        return ERROR_FORMAT.format(name=name, error=str(exc)), exc
    try:
        try:
            result = execute(functions, name, args, clean_namespace=clean_namespace)
        except Exception:
            raise
        except BaseException:  # upstream's func_timeout thread swallows it: result None (see above)
            result = None
        return dumps_as_upstream(result, FEEDBACK_NESTING_LIMIT, ensure_ascii=False), None
    except Exception as exc:
        return ERROR_FORMAT.format(name=name, error=str(exc)), exc


def call_tool(payload: dict[str, Any]) -> dict[str, Any]:
    """Sandbox job (``pytest_toolbench.benchmarks.toolhop.execution:call_tool``).

    payload: {"functions": [...], "name": str, "arguments": str, "clean_namespace": bool}.
    Runs in a per-call sandbox child; the pool checks and caps its reply (``call_tool_reply``).
    """
    content, exc = tool_content(
        list(payload["functions"]),
        payload["name"],
        payload["arguments"],
        clean_namespace=bool(payload.get("clean_namespace", False)),
    )
    return {
        "content": content,
        "raised": exc is not None,
        "exception_type": type(exc).__name__ if exc is not None else None,
    }


def call_tool_reply(value: Any, cap: int) -> dict[str, Any]:
    """Run by the sandbox pool, in the harness, on the reply a call's child sent: a tool may
    have forged it, so its shape is checked (the runner reads ``content`` as the tool message)
    and the whole tool message is capped at ``cap`` characters (``--sandbox-output-cap``)."""
    if not isinstance(value, dict) or not isinstance(value.get("content"), str) or not isinstance(value.get("raised"), bool):
        raise ValueError("expected {'content': str, 'raised': bool, 'exception_type': str | None}")
    kind = value.get("exception_type")
    if kind is not None and not isinstance(kind, str):
        raise ValueError("'exception_type' must be text or null")
    return {
        "content": cap_text(value["content"], cap),
        "raised": value["raised"],
        "exception_type": None if kind is None else cap_text(kind, 200),
    }
