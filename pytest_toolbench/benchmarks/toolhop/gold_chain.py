"""The gold tool chain of a ToolHop record, for the oracle: one call per hop, in hop order.

ToolHop's file has no gold call trace and no gold arguments (upstream ``data/ToolHop.json``): a record gives each hop's
sub-question, its intermediate answer (``sub_task``), its tool document and its Python source
(``functions``, in hop order). So the chain's tools and order are gold, and the arguments come
from the record itself, each call saying where they came from (``source``):

* ``example``: the tool's own worked example in its source (``# Example usage`` followed by a call
  such as ``prime_factorization(2011)``, live or commented out), when every argument is a literal
  and the call fits the tool's schema (only declared parameters, every required one).
  The dataset's generator wrote these for the question, so they are the closest thing to gold
  arguments the file holds.
* ``derived``: otherwise, the required parameters (the schema's, and the signature's ones the
  schema declares) filled from the gold: an enum's first value,
  numbers from the hop's sub-question in order, else the previous hop's gold answer (the
  sub-question of the first hop for the first hop), shaped to the parameter's JSON type.

Either way the call is schema-valid by construction, so the oracle makes no invocation error in
schema mode. Whether a tool actually returned its hop's gold answer is reported, not assumed
(:func:`reached_gold`): a derived argument may well miss, and a tool may raise on it.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_toolbench.benchmarks.toolhop.schema import ToolHopRecord

ArgumentSource = Literal["example", "derived"]
_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class GoldCall:
    """One hop of the gold chain: the tool to call, with which arguments, and why."""

    hop: int
    name: str
    arguments: dict[str, Any]
    source: ArgumentSource
    sub_question: str
    #: The hop's intermediate answer (``sub_task`` value): what the call should return.
    gold: str
    #: Required parameters a derived call could only fill with a placeholder (enum/bool/object).
    placeholders: tuple[str, ...] = field(default=())


#: What parsing a record's text may raise besides a syntax error: a number too long for int(),
#: an expression nested too deep for the parser (MemoryError, RecursionError). A record is data:
#: the oracle then has no example / signature for that tool, it never stops the run.
_PARSE_ERRORS = (SyntaxError, ValueError, MemoryError, RecursionError)
#: Longest line read for a worked example (real ones are a few dozen characters); each ")" in it
#: is tried as the call's end, so an endless line would cost a parse per ")".
_MAX_EXAMPLE_LINE = 1000


def _function_def(source: str, name: str) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(source)
    except _PARSE_ERRORS:
        return None
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _literal_call(text: str, name: str) -> tuple[list[Any], dict[str, Any]] | None:
    """The first ``name(<literals>)`` call in one line of text (``None`` if there is none)."""
    if len(text) > _MAX_EXAMPLE_LINE:
        return None
    start = text.find(f"{name}(")
    while start != -1:
        tail = text[start:]
        for end in (i for i, ch in enumerate(tail) if ch == ")"):
            try:
                node = ast.parse(tail[: end + 1], mode="eval").body
            except _PARSE_ERRORS:
                continue
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                try:
                    args = [ast.literal_eval(a) for a in node.args]
                    kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    return None
                return args, kwargs
            break
        start = text.find(f"{name}(", start + 1)
    return None


def example_arguments(source: str, name: str) -> dict[str, Any] | None:
    """Keyword arguments of the first literal example call after the function's definition."""
    fn = _function_def(source, name)
    if fn is None or fn.end_lineno is None:
        return None
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    for line in source.splitlines()[fn.end_lineno:]:
        found = _literal_call(line.strip().lstrip("#").strip(), name)
        if found is None:
            continue
        args, kwargs = found
        if len(args) > len(params):
            return None
        return dict(zip(params, args)) | kwargs
    return None


def signature_required(source: str, name: str) -> list[str]:
    """The function's parameters without a default: calling it without one raises even where
    the schema's ``required`` leaves it out (29/450 tools differ in the 100 real records)."""
    fn = _function_def(source, name)
    if fn is None:
        return []
    positional = fn.args.posonlyargs + fn.args.args
    without_default = positional[: len(positional) - len(fn.args.defaults)]
    keyword_only = [a for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is None]
    return [a.arg for a in without_default + keyword_only]


def _fits(arguments: dict[str, Any], parameters: dict[str, Any]) -> bool:
    props = set((parameters.get("properties") or {}).keys())
    required = set(parameters.get("required") or [])
    return set(arguments) <= props and required <= set(arguments)


def _types(schema: dict[str, Any]) -> list[str]:
    t = schema.get("type", "string")
    return [str(x) for x in t] if isinstance(t, list) else [str(t)]


def _shaped(value: str, schema: dict[str, Any], numbers: list[str]) -> tuple[Any, bool]:
    """``value`` (a gold string) as the parameter's JSON type; True when only a placeholder fits."""
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0], True
    types = _types(schema)
    if "string" in types:
        return value, False
    for kind in types:
        if kind in ("integer", "number"):
            text = numbers.pop(0) if numbers else next(iter(_NUMBER_RE.findall(value)), None)
            if text is None:
                continue
            number = float(text)
            if not math.isfinite(number):  # 400 digits: inf, which no int() or JSON takes
                continue
            return (int(number) if kind == "integer" or number.is_integer() else number), False
        if kind == "array":
            item, placeholder = _shaped(value, schema.get("items") or {}, numbers)
            return [item], placeholder
        if kind == "boolean":
            return bool(schema.get("default", False)), True
        if kind == "object":
            return {}, True
    return value, True


def derived_arguments(
    parameters: dict[str, Any], sub_question: str, previous: str | None,
    also_required: list[str] | None = None,
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The required parameters filled from the gold (see the module docstring), plus those of
    ``also_required`` (the signature's) that the schema declares: still schema-valid."""
    props = parameters.get("properties") or {}
    numbers = _NUMBER_RE.findall(sub_question)
    value = previous if previous is not None else sub_question
    arguments: dict[str, Any] = {}
    placeholders: list[str] = []
    wanted = list(parameters.get("required") or [])
    wanted += [p for p in also_required or [] if p in props and p not in wanted]
    for name in wanted:
        arguments[name], placeholder = _shaped(value, props.get(name) or {}, numbers)
        if placeholder:
            placeholders.append(name)
    return arguments, tuple(placeholders)


def gold_chain(record: ToolHopRecord) -> list[GoldCall]:
    """One call per hop, in hop order (``tools``/``functions`` order, as in ``data/ToolHop.json``)."""
    chain: list[GoldCall] = []
    previous: str | None = None
    hops = list(record.tools.items())
    for hop, ((sub_question, doc), source) in enumerate(zip(hops, record.functions)):
        name, parameters = doc["name"], doc.get("parameters") or {}
        gold = record.sub_task.get(sub_question, "")
        example = example_arguments(source, name)
        if example is not None and _fits(example, parameters):
            call = GoldCall(hop, name, example, "example", sub_question, gold)
        else:
            arguments, placeholders = derived_arguments(parameters, sub_question, previous,
                                                        signature_required(source, name))
            call = GoldCall(hop, name, arguments, "derived", sub_question, gold, placeholders)
        chain.append(call)
        previous = gold
    return chain


def reached_gold(feedback: str, gold: str) -> bool:
    """Whether a tool's feedback holds the hop's gold answer, by the upstream scorer's own test
    (gold ``.rstrip('.0').lower()`` as a substring of the comma-free, lowered text, upstream ``code/evaluation_*.py``)."""
    return gold.rstrip(".0").lower() in feedback.replace(",", "").lower()


__all__ = ["GoldCall", "derived_arguments", "example_arguments", "gold_chain", "reached_gold",
           "signature_required"]
