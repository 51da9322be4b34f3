#!/usr/bin/env python3
"""ToolHop's tool messages against upstream's ``get_feedback``, on generated calls to real tools.

    pip install --target DEPS func_timeout   # upstream's dependency: get_feedback runs tools under it
    PYTHONPATH=DEPS python tests/upstream_diff/toolhop_tool_feedback.py UPSTREAM/code/evaluation_closed.py \\
        [--calls 20000] [--seed 1] [--data ../shared/datasets/toolhop/ToolHop.sample80.json]

``UPSTREAM`` is a clone of ``MananDesai54/llm-benchmarking`` at ``61da069`` (the original
``evaluation_closed.py``). Upstream's script is run as a module (every import and definition of
its own, ``main()`` not called), so the tools its ``get_feedback`` execs see upstream's globals;
the harness's :func:`tool_content` (what the sandbox worker runs) gets the same call. Each call is
made for a real record's tool from its JSON schema and then bent: arguments of the wrong type,
missing or extra keys, ``null``s, arguments that are not JSON or not an object, names of
another record's tool, of a builtin (``len``, ``print``, ``exit``), of a module attribute, an
expression or a literal. With ``--deep`` (a share of the calls, 0.03 by default) a call's
arguments nest about as deep as upstream's ``json.loads`` reads (CPython 3.11: 988 levels in
``get_feedback``), broken or not, or one of four added tools returns a value about as deep as its
``json.dumps`` writes; upstream's ``get_feedback`` is called as deep in a worker thread's stack as
its run calls it, so both meet the same limit. The two contents must be equal. The harness's documented deviations
(a name that is an expression, which upstream would ``eval``; a name of the script's own
functions) are generated only with ``--deviations``, and then expected to differ; a call past upstream's 10 s limit (which stops
upstream's whole run: the ToolHop ledger's row 12) is counted, not compared. ``--sandbox`` runs
the harness's side in the real sandbox (``ToolSandbox``, the runner's job and its 10 s limit) in
place of the in-process call: the content must still be upstream's, and a call upstream timed out
on must time out there too. There every call hashes strings with seed 0 (ledger row 24), so the script
then runs itself (and upstream's calls) with ``PYTHONHASHSEED=0`` too: a tool whose result
follows a set's order gives both sides the same order. Without it the tools run in this process: only data you
trust (the real records are benign), never the hostile corpus.
"""

from __future__ import annotations

import builtins
import collections
import contextlib
import io
import json
import os
import random
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from upstream_source import diff_arguments  # noqa: E402

from pytest_toolbench.benchmarks.toolhop.execution import tool_content  # noqa: E402

#: upstream's func_set_timeout(10) around every tool call
UPSTREAM_TIMEOUT_S = 10.0
DEFAULT_DATA = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "toolhop" / "ToolHop.sample80.json"
ODD_NAMES = ["len", "print", "exit", "quit", "sorted", "json", "datetime", "sha256", "sleep", "1", "None",
             "'text'", "[1, 2]", "", " ", "def", "lambda", "__import__"]
#: The harness's documented deviations (ToolHop ledger rows 13 and 14): upstream evaluates these
#: expressions, finds its script's own functions and always has ``func_set_timeout`` (only
#: ``--deviations`` makes such calls, expecting a difference).
DEVIATIONS = ["os.getcwd", "json.dumps", "len([1])", "(lambda: 1)", "get_feedback", "main", "req_closed",
              "func_set_timeout"]
VALUES: dict[str, list[Any]] = {
    "string": ["Paris", "", "The Godfather", "1994", "x" * 50, "Å", "2021-05-01"],
    "integer": [0, 1, 7, -3, 1994, 10**12],
    "number": [0.5, 1, -2.25, 1e9],
    "boolean": [True, False],
    "array": [[], ["a", "b"], [1, 2]],
    "object": [{}, {"k": "v"}],
}


#: Tools added for ``--deep`` calls: their results nest as deep as their arguments say.
DEEP_TOOLS = {
    "echo": "def echo(x):\n    return x\n",
    "wrap": "def wrap(x, n=3):\n    for _ in range(n):\n        x = [x]\n    return x\n",
    "set_leaf": "def set_leaf(n):\n    v = {1}\n    for _ in range(n):\n        v = [v]\n    return v\n",
    "loop": "def loop(n):\n    v = []\n    v.append(v)\n    for _ in range(n):\n        v = [v]\n    return v\n",
}
#: What the deepest level of a ``--deep`` argument holds: a value, or each kind of syntax error.
DEEP_BOTTOMS = ["1", '"x"', "[]", "1 2", "1,", '"\\q"', "x", '"open', '{"a" 1}', '{"a": 1,}', "{[", "1.]",
                "1, ]", '{"a": 1, }']


def deep_call(rng: random.Random) -> tuple[str, str]:
    """A call to one of :data:`DEEP_TOOLS` near the nesting limit of upstream's json calls."""
    roll = rng.random()
    if roll < 0.6:
        levels = [rng.choice(["[", '{"a": ']) for _ in range(rng.randint(978, 994))]
        closers = "".join("]" if level == "[" else "}" for level in reversed(levels))
        if rng.random() < 0.2:
            closers = closers[:-1]
        value = "".join(levels) + rng.choice(DEEP_BOTTOMS) + closers
        return rng.choice(["echo", "wrap"]), '{"x": ' + value + "}" if rng.random() < 0.9 else value
    if roll < 0.9:
        return rng.choice(["set_leaf", "loop"]), json.dumps({"n": rng.randint(978, 992)})
    return "echo", rng.choice(['{"x": [1, 2,]}', '{"x": 1,}', '{"x": {"a": 1,\n }}', '{"x" 1}'])


def at_upstreams_depth(pool: ThreadPoolExecutor, get_feedback: Any, call: dict[str, Any], functions: list[str]) -> str:
    """``get_feedback`` in a worker thread, under ``sample_process`` -> ``sample_process_<scenario>``
    as upstream's run calls it (json's C code counts these frames on CPython 3.11)."""

    def sample_process_scenario() -> str:
        with contextlib.redirect_stdout(io.StringIO()):  # what the tools print
            return get_feedback([call], functions)[0]["content"]

    def sample_process() -> str:
        return sample_process_scenario()

    return pool.submit(sample_process).result()


def upstream_feedback(source: Path) -> Any:
    """``get_feedback`` of upstream's script, run as ``__main__`` runs it, without ``main()``."""
    text = source.read_text(encoding="utf-8")
    text = re.sub(r"\nif __name__ == ['\"]__main__['\"]:\n(?:[ \t]+.*\n?)*", "\n", text)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    exec(compile(text, str(source), "exec"), namespace)  # noqa: S102 - the user's own upstream checkout
    return namespace["get_feedback"]


def value_for(rng: random.Random, schema: dict[str, Any]) -> Any:
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, list):  # ["string", "null"]
        kind = rng.choice(kind)
    if rng.random() < 0.15:  # another type than the schema's
        kind = rng.choice(list(VALUES))
    if rng.random() < 0.05:
        return None
    if isinstance(schema, dict) and schema.get("enum") and rng.random() < 0.7:
        return rng.choice(schema["enum"])
    return rng.choice(VALUES.get(kind, VALUES["string"]) if isinstance(kind, str) else VALUES["string"])


def arguments_for(rng: random.Random, tool: dict[str, Any]) -> str:
    parameters = tool.get("parameters") or {}
    properties: dict[str, Any] = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    args = {name: value_for(rng, schema) for name, schema in properties.items()
            if name in required or rng.random() < 0.4}
    if required and rng.random() < 0.1:
        args.pop(rng.choice(sorted(required)), None)
    if rng.random() < 0.1:
        args[rng.choice(["extra", "query", "limit"])] = "x"
    text = json.dumps(args, ensure_ascii=rng.random() < 0.5)
    roll = rng.random()
    if roll < 0.03:
        return text[:-1]  # not JSON
    if roll < 0.06:
        return json.dumps(rng.choice([[1], "text", 3, None]))  # JSON, not an object
    return text


def main() -> int:
    parser = diff_arguments(__doc__, ("evaluation_closed", "upstream's code/evaluation_closed.py"), ("--calls", 20000))
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--deviations", action="store_true", help="also names upstream would eval")
    parser.add_argument("--sandbox", action="store_true", help="the harness's side in the real sandbox")
    parser.add_argument("--deep", type=float, default=0.03, help="share of calls nested near json's limit")
    args = parser.parse_args()
    if args.sandbox and os.environ.get("PYTHONHASHSEED") != "0":  # as the sandbox's calls hash
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
    with contextlib.ExitStack() as stack:
        harness = in_process
        if args.sandbox:
            from pytest_toolbench.sandbox.pool import ToolSandbox

            harness = SandboxedCalls(stack.enter_context(ToolSandbox()))
        return compare(args, harness)


def in_process(functions: list[str], name: str, arguments: str, upstream_timed_out: bool) -> str | None:
    """``tool_content`` in this process; None (not run) where upstream timed out: it would not end."""
    if upstream_timed_out:
        return None
    with contextlib.redirect_stdout(io.StringIO()):  # what the tools print
        return tool_content(functions, name, arguments)[0]


class SandboxedCalls:
    """The runner's sandbox job, as a case's tool call runs it; a timeout reads ``"timeout"``."""

    def __init__(self, sandbox: Any):
        self.sandbox = sandbox

    def __call__(self, functions: list[str], name: str, arguments: str, upstream_timed_out: bool) -> str | None:
        from pytest_toolbench.benchmarks.toolhop.runner import EXECUTION_JOB

        outcome = self.sandbox.run(EXECUTION_JOB, {"functions": functions, "name": name, "arguments": arguments,
                                                   "clean_namespace": False}, timeout_s=UPSTREAM_TIMEOUT_S)
        return str(outcome.value["content"]) if outcome.status == "ok" else outcome.status


def compare(args: Any, harness: Any) -> int:
    get_feedback = upstream_feedback(args.evaluation_closed)
    records = json.loads(args.data.read_text(encoding="utf-8"))
    all_names = [tool["name"] for record in records for tool in record["tools"].values()]
    rng = random.Random(args.seed)
    outcomes: collections.Counter[str] = collections.Counter()
    differ = 0
    pool = ThreadPoolExecutor(1)
    for _ in range(args.calls):
        record = rng.choice(records)
        functions = record["functions"]
        tool = rng.choice(list(record["tools"].values()))  # keyed by the sub-question it answers
        name = tool["name"]
        arguments = arguments_for(rng, tool)
        roll = rng.random()
        if roll < 0.05:
            name = rng.choice(all_names)
        elif roll < 0.1:
            name = rng.choice(ODD_NAMES + (DEVIATIONS if args.deviations else []))
        elif roll < 0.1 + args.deep:
            name, arguments = deep_call(rng)
            functions = [*functions, *DEEP_TOOLS.values()]
        call = {"id": "call_0", "type": "function", "function": {"name": name, "arguments": arguments}}
        try:
            theirs = at_upstreams_depth(pool, get_feedback, call, functions)
        except BaseException as exc:  # noqa: BLE001
            if type(exc).__name__ != "FunctionTimedOut":
                raise
            # Past 10 s upstream's whole run stops (ledger row 12); the harness's sandbox feeds
            # back a timeout message instead.
            theirs = "timeout"
        ours = harness(functions, name, arguments, theirs == "timeout")
        if ours is None:
            outcomes["upstream timed out (not run)"] += 1
            continue
        outcomes["timeout" if theirs == "timeout" else
                 "error message" if theirs.startswith("an error occured") else "result"] += 1
        if theirs != ours:
            differ += 1
            if differ <= args.show:
                print(json.dumps({"record": record["id"], "name": name, "arguments": arguments,
                                  "upstream": theirs[:500], "harness": ours[:500]}, ensure_ascii=False))
    for what, count in sorted(outcomes.items()):
        print(f"{what:14} {count}")
    print(f"{args.calls} calls (seed {args.seed}, {args.data.name}): {differ} differ from upstream")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
