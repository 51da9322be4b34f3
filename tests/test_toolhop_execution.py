"""ToolHop tool execution: upstream semantics (``get_feedback`` in ``code/evaluation_*.py``), checked against a literal replica.

The replica below is upstream's ``excute_func`` mechanism written out as upstream wrote it
(dict-less ``exec`` inside a function, then ``eval(name)(**args)``). Under this Python (3.11, i.e.
<= 3.12 semantics) it behaves exactly as upstream did, so sandbox content must match it byte for byte.
It runs in a module namespace built from ``script_globals()``, so both sides see the same
script globals (``json``, ``os``, ``datetime`` module...), as upstream's tools did.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from typing import Any

import pytest

from pytest_toolbench.benchmarks.toolhop import execution
from pytest_toolbench.config import SandboxLimits
from pytest_toolbench.sandbox import ToolSandbox

from shared_data import REAL_TOOLHOP as SAMPLE
JOB = "pytest_toolbench.benchmarks.toolhop.execution:call_tool"

# Upstream's mechanism, verbatim in shape (evaluation_closed.py @61da069, get_feedback).
_REPLICA_SOURCE = '''
def excute_func(functions, func_name, func_args):
    for func in functions:
        if func.split('def')[1].split('(')[0].strip() == func_name:
            exec(func)
    return eval(func_name)(**func_args)


def upstream_content(functions, name, arguments):
    try:
        tool_args = json.loads(arguments)
        feedback = excute_func(functions, name, tool_args)
        return json.dumps(feedback, ensure_ascii=False)
    except Exception as e:
        return f"an error occured when call {name}: {str(e)}"
'''
_REPLICA_CODE = compile(_REPLICA_SOURCE, "evaluation_closed.py", "exec", dont_inherit=True)


#: The replica runs upstream's ``exec(func)`` inside a function and then ``eval(func_name)``: it
#: finds the function only where ``exec`` writes into the caller's frame locals, which PEP 667
#: ended in Python 3.13. There the replica cannot stand for upstream (which ran on <= 3.12);
#: the sandbox, which does not lean on that rule, is still checked against the hand-written
#: expected values.
REPLICA_RUNS_HERE = sys.version_info < (3, 13)
needs_replica = pytest.mark.skipif(not REPLICA_RUNS_HERE,
                                   reason="upstream's exec/eval replica needs Python <= 3.12 (PEP 667)")


def upstream_content(functions: list[str], name: str, arguments: str) -> str:
    assert REPLICA_RUNS_HERE, "the replica needs <= 3.12 exec/eval semantics"
    module_ns = execution.script_globals()
    exec(_REPLICA_CODE, module_ns)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return module_ns["upstream_content"](functions, name, arguments)


@pytest.fixture(scope="module")
def sandbox():
    with ToolSandbox(
        SandboxLimits(workers=2, cpu_seconds=10), preload=("pytest_toolbench.benchmarks.toolhop.execution",)
    ) as sb:
        yield sb


def call(sandbox: ToolSandbox, functions: list[str], name: str, arguments: str, clean: bool = False) -> dict:
    outcome = sandbox.run(
        JOB, {"functions": functions, "name": name, "arguments": arguments, "clean_namespace": clean}, 10.0
    )
    assert outcome.status == "ok", outcome.detail
    return outcome.value


# ------------------------------------------------------------------------------ hand-written


TOP_LEVEL_IMPORT = "import re\n\ndef find_digits(text):\n    return re.findall(r'\\d', text)\n"
FROM_DATETIME = (
    "from datetime import datetime\n\ndef parse_day(date):\n"
    "    return datetime.strptime(date, '%Y-%m-%d').day\n"
)
RECURSIVE = "def fact(n):\n    return 1 if n <= 1 else n * fact(n - 1)\n"
WITH_EXAMPLE = (
    "def shout(word: str) -> str:\n    return word.upper()\n\n# Example usage\nprint(shout('hi'))\nresult = shout('x')\n"
)
FIRST = "def pick(x):\n    return 'first'\n"
SECOND = "def pick(x, y=2):\n    return 'second'\n"
RETURNS_SET = "def uniq(xs):\n    return set(xs)\n"
RETURNS_TEXT = "def greet(name):\n    return f'héllo {name}'\n"
BAD_EXAMPLE = "def ok(x):\n    return x\n\n# Example usage\nprint(undefined_thing)\n"

HAND_CASES: list[tuple[list[str], str, str, str]] = [
    ([TOP_LEVEL_IMPORT], "find_digits", '{"text": "a1b2"}', "an error occured when call find_digits: name 're' is not defined"),
    ([FROM_DATETIME], "parse_day", '{"date": "2024-05-06"}', "an error occured when call parse_day: module 'datetime' has no attribute 'strptime'"),
    ([RECURSIVE], "fact", '{"n": 3}', "an error occured when call fact: name 'fact' is not defined"),
    ([RECURSIVE], "fact", '{"n": 1}', "1"),
    ([WITH_EXAMPLE], "shout", '{"word": "abc"}', '"ABC"'),
    ([FIRST, SECOND], "pick", '{"x": 1, "y": 3}', '"second"'),
    ([SECOND, FIRST], "pick", '{"x": 1, "y": 3}', "an error occured when call pick: pick() got an unexpected keyword argument 'y'"),
    ([RETURNS_SET], "uniq", '{"xs": [1, 1]}', "an error occured when call uniq: Object of type set is not JSON serializable"),
    ([RETURNS_TEXT], "greet", '{"name": "Zoë"}', '"héllo Zoë"'),
    ([BAD_EXAMPLE], "ok", '{"x": 1}', "an error occured when call ok: name 'undefined_thing' is not defined"),
    ([RETURNS_TEXT], "nope", '{"name": "a"}', "an error occured when call nope: name 'nope' is not defined"),
    ([RETURNS_TEXT], "greet", '{"name": ', "an error occured when call greet: Expecting value: line 1 column 10 (char 9)"),
    ([RETURNS_TEXT], "greet", "[1, 2]", "an error occured when call greet: __main__.greet() argument after ** must be a mapping, not list"),
    ([RETURNS_TEXT], "greet", "{}", "an error occured when call greet: greet() missing 1 required positional argument: 'name'"),
    ([RETURNS_TEXT], "greet one", "{}", "an error occured when call greet one: invalid syntax (<string>, line 1)"),
    ([RETURNS_TEXT], " greet", '{"name": "a"}', "an error occured when call  greet: name 'greet' is not defined"),
    # eval() sees excute_func's own variables through the locals snapshot
    ([RETURNS_TEXT], "func_args", '{"name": "a"}', "an error occured when call func_args: 'dict' object is not callable"),
    ([FIRST, RETURNS_TEXT], "func", "{}", "an error occured when call func: 'str' object is not callable"),
    ([RETURNS_TEXT], "(yield)", "{}", "an error occured when call (yield): 'yield' outside function (<string>, line 1)"),
    ([RETURNS_TEXT], "json", "{}", "an error occured when call json: 'module' object is not callable"),
    ([RETURNS_TEXT], "dict", '{"a": 1}', '{"a": 1}'),
    ([RETURNS_TEXT], "len", "{}", "an error occured when call len: len() takes exactly one argument (0 given)"),
    ([RETURNS_TEXT], "7", "{}", "an error occured when call 7: 'int' object is not callable"),
    (["no function here"], "x", "{}", "an error occured when call x: list index out of range"),
]


@pytest.mark.parametrize("functions,name,arguments,expected", HAND_CASES)
def test_hand_cases_match_expected_and_replica(sandbox, functions, name, arguments, expected):
    got = call(sandbox, functions, name, arguments)
    assert got["content"] == expected
    if REPLICA_RUNS_HERE:
        assert upstream_content(functions, name, arguments) == expected
    assert got["raised"] == expected.startswith("an error occured")


def test_injection_name_is_never_evaluated(sandbox, tmp_path):
    """Deviation by design: upstream would run this; we report an unknown name."""
    marker = tmp_path / "pwned"
    name = f"__import__('pathlib').Path({str(marker)!r}).touch"
    got = call(sandbox, [RETURNS_TEXT], name, "{}")
    assert got["content"] == f"an error occured when call {name}: name '{name}' is not defined"
    assert not marker.exists()


def test_exception_type_is_reported(sandbox):
    got = call(sandbox, [RETURNS_SET], "uniq", '{"xs": [1]}')
    assert got["raised"] and got["exception_type"] == "TypeError"
    got = call(sandbox, [RETURNS_TEXT], "greet", '{"name": "a"}')
    assert not got["raised"] and got["exception_type"] is None


def test_memory_error_takes_the_error_path():
    hog = "def hog(n):\n    return len(bytearray(n))\n"
    with ToolSandbox(SandboxLimits(workers=1, memory_mb=512)) as sb:
        got = call(sb, [hog], "hog", json.dumps({"n": 10 * 1024**3}))
        assert got == {"content": "an error occured when call hog: ", "raised": True, "exception_type": "MemoryError"}
        assert call(sb, [hog], "hog", '{"n": 10}')["content"] == "10"


def test_clean_namespace_is_a_named_deviation(sandbox):
    assert call(sandbox, [TOP_LEVEL_IMPORT], "find_digits", '{"text": "a1b2"}', clean=True)["content"] == '["1", "2"]'
    assert call(sandbox, [RECURSIVE], "fact", '{"n": 4}', clean=True)["content"] == "24"
    assert call(sandbox, [FROM_DATETIME], "parse_day", '{"date": "2024-05-06"}', clean=True)["content"] == "6"
    # upstream script globals are not there in the clean namespace
    assert call(sandbox, [RETURNS_TEXT], "json", "{}", clean=True)["content"] == (
        "an error occured when call json: name 'json' is not defined"
    )


def test_timeout_of_a_tool_is_reported_by_the_sandbox(sandbox):
    loop = "def spin():\n    while True:\n        pass\n"
    outcome = sandbox.run(JOB, {"functions": [loop], "name": "spin", "arguments": "{}"}, 1.0)
    assert outcome.status == "timeout"
    assert call(sandbox, [RETURNS_TEXT], "greet", '{"name": "a"}')["content"] == '"héllo a"'


# ---------------------------------------------------------------------- real records (80)


def _default_for(prop: dict[str, Any]) -> Any:
    if prop.get("enum"):
        return prop["enum"][0]
    kind = prop.get("type", "string")
    if isinstance(kind, list):
        kind = kind[0] if kind else "string"
    return {
        "string": "Alice Smith",
        "integer": 3,
        "number": 2.5,
        "boolean": True,
        "array": ["Alice Smith"] if prop.get("items", {}).get("type", "string") == "string" else [1],
        "object": {},
    }.get(kind, "Alice Smith")


def _arguments(tool: dict[str, Any]) -> dict[str, Any]:
    params = tool.get("parameters", {})
    props = params.get("properties", {})
    return {name: _default_for(props.get(name, {})) for name in params.get("required", [])}


def _real_cases() -> list[tuple[str, list[str], str, str]]:
    records = json.loads(SAMPLE.read_text(encoding="utf-8"))
    assert len(records) == 80
    cases: list[tuple[str, list[str], str, str]] = []
    for rec in records:
        functions = rec["functions"]
        rid = rec["id"]
        cases.append((f"{rid}/unknown", functions, "no_such_tool", "{}"))
        for tool in rec["tools"].values():
            name = tool["name"]
            args = _arguments(tool)
            cases.append((f"{rid}/{name}/schema", functions, name, json.dumps(args)))
            if args:
                missing = dict(list(args.items())[1:])
                cases.append((f"{rid}/{name}/missing", functions, name, json.dumps(missing)))
            cases.append((f"{rid}/{name}/extra", functions, name, json.dumps({**args, "zz_unexpected": 1})))
            cases.append((f"{rid}/{name}/badjson", functions, name, json.dumps(args)[:-1]))
            cases.append((f"{rid}/{name}/nondict", functions, name, json.dumps(list(args.values()))))
    return cases


@needs_replica
@pytest.mark.skipif(not SAMPLE.exists(), reason=f"{SAMPLE} not available")
def test_sandbox_matches_upstream_replica_on_all_80_real_records(sandbox):
    cases = _real_cases()
    mismatches = []
    successes = 0
    for case_id, functions, name, arguments in cases:
        expected = upstream_content(functions, name, arguments)
        got = call(sandbox, functions, name, arguments)["content"]
        successes += not got.startswith("an error occured")
        if got != expected:
            mismatches.append((case_id, expected[:200], got[:200]))
    assert not mismatches, f"{len(mismatches)}/{len(cases)} differ, e.g. {mismatches[:5]}"
    # the comparison is meaningful: both paths were exercised
    assert successes > 100 and len(cases) - successes > 1000


# ------------------------------------------------------------- SystemExit, poisoning, caps

SYS_EXIT = "def leave(code=0):\n    import sys\n    sys.exit(code)\n"
EXIT_IN_EXAMPLE = "def fine(x):\n    return x\n\n# Example usage\nraise SystemExit\n"


@pytest.mark.parametrize(
    "functions,name,arguments",
    [
        ([RETURNS_TEXT], "exit", "{}"),  # the site builtin: raises SystemExit
        ([RETURNS_TEXT], "quit", '{"code": 3}'),
        ([SYS_EXIT], "leave", '{"code": 1}'),
        ([EXIT_IN_EXAMPLE], "fine", '{"x": 1}'),  # raised while exec'ing the source
    ],
)
def test_system_exit_gives_upstreams_null_content(sandbox, functions, name, arguments):
    """Upstream's func_timeout thread swallows a non-Exception: excute_func returns None, so the
    content is json.dumps(None) == "null", on the success path (hand-derived, see execution.py)."""
    got = call(sandbox, functions, name, arguments)
    assert got == {"content": "null", "raised": False, "exception_type": None}
    assert call(sandbox, [RETURNS_TEXT], "greet", '{"name": "a"}')["content"] == '"héllo a"'


POISON_HARNESS = (
    "def poison():\n"
    "    import sys, builtins, decimal, json, threading, time\n"
    "    ex = sys.modules['pytest_toolbench.benchmarks.toolhop.execution']\n"
    "    ex.tool_content = lambda *a, **k: ('POISONED', None)\n"
    "    ex.ERROR_FORMAT = 'POISONED {name} {error}'\n"
    "    builtins.sorted = lambda *a, **k: ['POISONED']\n"
    "    decimal.getcontext().prec = 3\n"
    "    json.dumps = lambda *a, **k: '\"POISONED\"'\n"
    "    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
    "    return 'ok'\n"
)
OBSERVE = (
    "def observe():\n"
    "    import decimal, threading\n"
    "    return [sorted([2, 1]), str(decimal.Decimal(1) / decimal.Decimal(7)), threading.active_count()]\n"
)


def test_a_tool_poisoning_the_harness_does_not_reach_the_next_call():
    with ToolSandbox(SandboxLimits(workers=1), preload=("pytest_toolbench.benchmarks.toolhop.execution",)) as sb:
        assert call(sb, [POISON_HARNESS], "poison", "{}")["content"] == '"POISONED"'  # its own call only
        assert call(sb, [OBSERVE], "observe", "{}")["content"] == '[[1, 2], "0.1428571428571428571428571429", 1]'
        assert call(sb, [RETURNS_TEXT], "nope", "{}")["content"] == "an error occured when call nope: name 'nope' is not defined"


def test_tool_content_is_capped_with_a_marked_cut():
    big = "def big(n):\n    return 'a' * n\n"
    loud = "def loud(n):\n    raise ValueError('e' * n)\n"
    with ToolSandbox(SandboxLimits(workers=1, output_cap=100)) as sb:
        assert call(sb, [big], "big", '{"n": 98}')["content"] == '"' + "a" * 98 + '"'  # 100 chars: kept
        got = call(sb, [big], "big", '{"n": 500}')["content"]
        assert got == '"' + "a" * 99 + "…[truncated 402 chars]"
        got = call(sb, [loud], "loud", '{"n": 500}')
        prefix = "an error occured when call loud: "
        assert got["content"] == (prefix + "e" * 500)[:100] + f"…[truncated {len(prefix) + 500 - 100} chars]"
        assert got["raised"]


ECHO = "def echo(x):\n    return x\n"
NEST = "def nest(n):\n    v = 1\n    for _ in range(n):\n        v = [v]\n    return v\n"


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        # upstream's get_feedback on CPython 3.11.7 (tests/upstream_diff/toolhop_tool_feedback.py --deep)
        ("echo", '{"x": ' + "[" * 987 + "]" * 987 + "}", "[" * 987 + "]" * 987),
        ("echo", '{"x": ' + "[" * 988 + "]" * 988 + "}",
         "an error occured when call echo: maximum recursion depth exceeded while decoding a JSON array from a unicode string"),
        ("nest", '{"n": 988}', "[" * 988 + "1" + "]" * 988),
        ("nest", '{"n": 989}', "an error occured when call nest: maximum recursion depth exceeded while encoding a JSON object"),
        ("echo", '{"x": [1, 2,]}', "an error occured when call echo: Expecting value: line 1 column 13 (char 12)"),
    ],
    ids=["arguments-988", "arguments-989", "result-988", "result-989", "trailing-comma"],
)
def test_json_nesting_and_errors_are_upstreams_in_the_sandbox(sandbox, name, arguments, expected):
    """The sandbox decodes three frames deeper than upstream's get_feedback, on any Python: the
    limits and messages are still CPython 3.11's at upstream's depth (pytest_toolbench.json_nesting)."""
    assert call(sandbox, [ECHO, NEST], name, arguments)["content"] == expected
