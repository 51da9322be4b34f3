"""How deep upstream's ``json`` calls read and wrote JSON: CPython 3.11's limit, on any interpreter.

Upstream's scripts ran on CPython 3.11 (3.10 counts the same way). There ``json``'s C scanner
counts each array or object it enters against the recursion limit (1000), on top of the Python
frames under it, so a model reply nested about 990 levels deep raises ``RecursionError``, and
upstream's code turns that into a dropped call or an error message. Two things move that point
for the harness:

* from Python 3.12 the C scanner has its own, far higher limit, so the same reply decodes;
* on 3.11 itself the harness's stack is not upstream's (the sandbox decodes a call's arguments
  three frames deeper than ``get_feedback`` did), so its own ``json.loads`` fails a few levels
  sooner.

So the verdict is computed from the text. :func:`check_nesting` raises 3.11's ``RecursionError``
(same message) exactly where upstream's call, ``caller_frame`` frames down its thread, raised it,
and :func:`loads_as_upstream` then decodes on a fresh stack where only the harness's deeper stack
stood in the way. The C encoder counts the same way: :func:`dumps_as_upstream` is ``json.dumps``
with upstream's limit. ``tests/test_json_nesting.py`` checks both against the running interpreter's
own ``json`` wherever that is 3.10 or 3.11 (calibrated on 3.10.13 and 3.11.7).
"""

from __future__ import annotations

import functools
import json
import re
import threading
from typing import Any, Callable, Iterator, TypeVar

T = TypeVar("T")

#: CPython's default recursion limit; upstream's scripts never change it.
RECURSION_LIMIT = 1000
#: What one 3.11 ``json.loads`` or ``json.dumps`` costs below its caller before the first
#: container: the function, the decoder's or encoder's two methods, and the C code's own call
#: (measured on 3.10 and 3.11, options or not).
_CALL_COST = 4

# A JSON string (escapes included), a lone quote (an unterminated or broken string: the scanner
# stops there), or a bracket. Brackets inside strings are never containers.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|"|[\[\]{}]', re.DOTALL)


def nesting_limit(caller_frame: int) -> int:
    """The deepest nesting 3.11's ``json.loads`` decodes, or ``json.dumps`` encodes, when called
    from frame ``caller_frame`` of its thread (frames 1-3 of a ``threading`` thread are its own,
    the target is frame 4)."""
    return RECURSION_LIMIT - caller_frame - _CALL_COST


def _scan(text: str, limit: int, end: int | None = None) -> tuple[int | None, int]:
    """Read the brackets of ``text`` (up to ``end``) as the scanner meets them: where the
    (limit + 1)-th nested container opens (None if it never does before the text stops being
    readable: a stray closer, an unterminated string), and how many are open there."""
    depth = 0
    for token in _TOKENS.finditer(text, 0, len(text) if end is None else end):
        char = token.group()
        if char == "[" or char == "{":
            depth += 1
            if depth > limit:
                return token.start(), depth
        elif char == "]" or char == "}":
            depth -= 1
            if depth < 0:
                break
        elif char == '"':
            break
    return None, depth


# 3.11 raises most syntax errors from inside the C scanner by calling ``JSONDecodeError``, which
# costs three more levels there: an error met that close to the limit is a RecursionError, whose
# message says which call tripped it (measured on 3.10 and 3.11). "Expecting value" and "Extra
# data" are raised by ``raw_decode`` / ``decode`` in Python, at the top of the stack: free.
_RAISED_AT_THE_TOP = ("Expecting value", "Extra data")
_ERROR_COST_MESSAGES = (
    "maximum recursion depth exceeded while calling a Python object",
    "maximum recursion depth exceeded",
    "maximum recursion depth exceeded while calling a Python object",
)
# From 3.13 a comma before a closing bracket has its own message, at the comma; 3.11 reports what
# it expected after the comma, where the bracket is.
_TRAILING_COMMA = {
    "Illegal trailing comma before end of array": "Expecting value",
    "Illegal trailing comma before end of object": "Expecting property name enclosed in double quotes",
}
_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _as_311(error: json.JSONDecodeError, limit: int, brackets: int) -> Exception:
    """What 3.11's ``json.loads``, with ``limit`` levels to spare, raised for this syntax error
    in a text of ``brackets`` opening brackets."""
    msg, pos = error.msg, error.pos
    if msg in _TRAILING_COMMA:
        msg, pos = _TRAILING_COMMA[msg], _WHITESPACE.match(error.doc, pos + 1).end()
    if msg not in _RAISED_AT_THE_TOP and brackets > limit - len(_ERROR_COST_MESSAGES):
        over = _scan(error.doc, limit, pos)[1] - (limit - len(_ERROR_COST_MESSAGES))
        if over > 0:
            return RecursionError(_ERROR_COST_MESSAGES[over - 1])
    if (msg, pos) == (error.msg, error.pos):
        return error
    return json.JSONDecodeError(msg, error.doc, pos)


def _decoding_too_deep(text: str, at: int) -> RecursionError:
    kind = "array" if text[at] == "[" else "object"
    return RecursionError(f"maximum recursion depth exceeded while decoding a JSON {kind} from a unicode string")


def loads_as_upstream(text: Any, limit: int) -> Any:
    """``json.loads(text)`` as 3.11 ran it with ``limit`` levels to spare (see
    :func:`nesting_limit`): the same value, or the same exception with the same message,
    whatever this interpreter and this stack allow."""
    if not isinstance(text, str):
        return json.loads(text)  # bytes or a wrong type: nothing a model's reply holds
    stop = len(text)  # where the scanner stopped: the end, or a syntax error
    failure: Exception | None = None
    try:
        try:
            value = json.loads(text)
        except RecursionError:  # our stack is deeper than upstream's, or the text is very deep
            value = on_fresh_stack(json.loads, text)
    except json.JSONDecodeError as exc:
        failure, stop = exc, exc.pos
    except RecursionError as exc:  # deeper than even a fresh stack reads: past the limit below
        failure = exc
    brackets = text.count("[") + text.count("{")
    if brackets > limit:
        at = _scan(text, limit)[0]
        if at is not None and at < stop:  # the scanner entered it before anything else failed
            raise _decoding_too_deep(text, at)
    if isinstance(failure, json.JSONDecodeError):
        raise _as_311(failure, limit, brackets)
    if failure is not None:
        raise failure
    return value


def check_nesting(text: Any, limit: int) -> None:
    """Raise the ``RecursionError`` 3.11's ``json.loads`` raised on ``text`` with ``limit``
    levels to spare, if it raised one; any other outcome is left to the caller's own call."""
    if not isinstance(text, str) or text.count("[") + text.count("{") <= limit - len(_ERROR_COST_MESSAGES):
        return  # the common case, in two C passes: the text cannot nest that deep
    try:
        loads_as_upstream(text, limit)
    except RecursionError:
        raise
    except Exception:  # noqa: BLE001 - not this check's outcome
        return


def dumps_as_upstream(value: Any, limit: int, **options: Any) -> str:
    """``json.dumps(value, **options)`` (options other than ``default``) as 3.11 ran it with
    ``limit`` levels to spare: the same text, or the same exception with the same message."""
    try:
        try:
            text = json.dumps(value, **options)
        except RecursionError:  # our stack is deeper than upstream's, or the value is very deep
            text = on_fresh_stack(functools.partial(json.dumps, value, **options))
    except Exception:
        too_deep = _encoder_recursion(value, limit)
        if too_deep is not None:
            raise too_deep from None
        raise
    # Written without an error, so the encoder entered every container the text holds.
    if text.count("[") + text.count("{") > limit and _scan(text, limit)[0] is not None:
        raise _encoding_too_deep()
    return text


def _encoding_too_deep() -> RecursionError:
    return RecursionError("maximum recursion depth exceeded while encoding a JSON object")


_DONE = object()
_BAD_KEY = object()


def _encoder_recursion(value: Any, limit: int) -> RecursionError | None:
    """The ``RecursionError`` 3.11's C encoder raised on ``value`` with ``limit`` levels to spare,
    or None where it failed otherwise. Walks the value depth first in the encoder's order and
    stops at the first failure (measured on 3.10 and 3.11):

    * a list or dict one level past the limit: "while encoding a JSON object";
    * a container met again (a circular reference) is found by a comparison, one more level:
      a RecursionError at the limit itself, else the encoder's ValueError;
    * a value of another type goes to ``JSONEncoder.default`` (Python, two more levels): a
      RecursionError within two levels of the limit, else its TypeError;
    * a key of another type or an int too long to print fails in C, at no cost.
    """
    containers: list[Iterator[Any]] = []  # the values still to write, per open container
    open_ids: list[int] = []
    item: Any = value
    while True:
        if isinstance(item, (list, tuple, dict)):
            depth = len(containers) + 1
            if depth > limit:
                return _encoding_too_deep()
            if id(item) in open_ids:
                return RecursionError("maximum recursion depth exceeded in comparison") if depth == limit else None
            open_ids.append(id(item))
            containers.append(_values(item))
        elif not _is_plain(item):
            if isinstance(item, int):
                return None  # too long to print: a ValueError
            over = len(containers) - (limit - 2)
            return RecursionError(_ERROR_COST_MESSAGES[over - 1]) if over > 0 else None
        while containers:
            item = next(containers[-1], _DONE)
            if item is _BAD_KEY:
                return None
            if item is not _DONE:
                break
            containers.pop()
            open_ids.pop()
        else:
            return None


def _values(container: Any) -> Iterator[Any]:
    """A container's values in the encoder's order; a dict's key it cannot write ends it."""
    if not isinstance(container, dict):
        yield from container
        return
    for key, item in container.items():
        if not (isinstance(key, (str, float)) or key is None or _is_plain(key) and isinstance(key, int)):
            yield _BAD_KEY
            return
        yield item


def _is_plain(leaf: Any) -> bool:
    """A leaf the C encoder writes itself, without failing: None, text, a float, a bool, or an
    int short enough to print."""
    if leaf is None or isinstance(leaf, (str, float)):
        return True
    if not isinstance(leaf, int):
        return False
    if leaf.bit_length() < 13_000:  # under 3,914 digits, below the default limit of 4,300
        return True
    try:
        int.__repr__(leaf)
    except ValueError:
        return False
    return True


def on_fresh_stack(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in a new thread, whose stack starts empty; its exception is re-raised."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = function(*args)
        except BaseException as exc:  # noqa: BLE001 - handed back to the calling thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="toolbench-fresh-stack", daemon=True)
    worker.start()
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
