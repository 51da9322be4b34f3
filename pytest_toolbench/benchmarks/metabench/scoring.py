"""Meta-Bench metrics for one judged turn (paper §3.3.2; where a sentence of the paper fixes a
definition the default follows it, the other readings are named options).

* T-Acc / P-Acc, unit = each ground-truth call: order-insensitive one-to-one matching by name
  (T) and by name plus matching arguments (P, so P <= T); extra predicted calls are not
  penalised (counted apart; ``extra_calls="penalise"`` makes a turn with any unmatched
  predicted call score no hit); meta_tool, ToolSearcher or get_user_input instead of the real
  tool is a miss. Arguments "match ... in value" (``p_acc="value"``): 72 == 72.0, but a string
  is not a number and a boolean is not 1; ``strict`` compares JSON types too, ``lenient``
  coerces.
* IRR, unit = chat turn: correct iff the reply invokes no tool other than get_user_input
  (meta_tool counts as an invocation unless ``irr_meta_tool="abstain"``); what is an
  invocation is parsing.py's call reading, so prose and JSON shown in prose are abstention.
* FMD, unit = meta_tool turn (``fmd_unit="turn"``): "the success rate of this meta-tool
  function calling", a success being at least one well-formed retriever call;
  ``fmd_unit="gold_tool"`` credits min(#calls, #gold) per gold missing tool.
* HR@k, unit = each gold missing tool: hit iff it lies "within the retrieved tool set", the
  union of the top-k of the turn's retriever calls (``hr_matching="retrieved_set"``);
  ``bipartite`` lets each retriever call hit at most one gold tool.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_toolbench.benchmarks.metabench.prompts import (
    GET_USER_INPUT_NAME,
    META_TOOL_NAME,
    TOOLSEARCHER_NAME,
)


def canonical(value: Any) -> str:
    """JSON canonical form: same keys, values and JSON types (1 != 1.0 != "1" != true)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def same_value(a: Any, b: Any) -> bool:
    """Equal "in value": numbers by numeric value (72 == 72.0), booleans only to booleans
    (JSON true is not 1), strings exactly (case and spaces count; "72" is text, not 72), null
    only to null, lists element by element in order, objects by key set and value."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return a is None and b is None


def _lenient_value(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = " ".join(value.split()).casefold()
        try:
            return float(text)
        except ValueError:
            return text
    if isinstance(value, list):
        return [_lenient_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _lenient_value(v) for k, v in value.items()}
    return value


def _defaults_and_required(schema: dict[str, Any] | None) -> tuple[dict[str, Any], set[str]]:
    params = (schema or {}).get("parameters") or {}
    props = params.get("properties") or {}
    defaults = {k: v["default"] for k, v in props.items() if isinstance(v, dict) and "default" in v}
    required = params.get("required") or (schema or {}).get("required") or []
    return defaults, set(required if isinstance(required, list) else [])


def params_equal(pred: Any, gold: Any, mode: str = "value", schema: dict[str, Any] | None = None) -> bool:
    """Value: :func:`same_value` (the paper's "match ... in value"). Strict: canonical JSON
    equality, types included. Lenient: coerced values, casefolded and whitespace-collapsed
    strings, parameters equal to their declared default dropped on both sides, and predicted
    optional parameters absent from the gold and without a declared default ignored."""
    if mode == "value":
        return same_value(pred, gold)
    if mode == "strict":
        return canonical(pred) == canonical(gold)
    if not isinstance(pred, dict) or not isinstance(gold, dict):
        return _lenient_value(pred) == _lenient_value(gold)
    defaults, required = _defaults_and_required(schema)

    def reduce(d: dict[str, Any]) -> dict[str, Any]:
        return {
            k: _lenient_value(v) for k, v in d.items()
            if not (k in defaults and _lenient_value(v) == _lenient_value(defaults[k]))
        }

    p, g = reduce(pred), reduce(gold)
    # An extra optional parameter with no declared default is ignored; one with a default
    # must equal it (else it changes the call), and was dropped above if it does.
    p = {k: v for k, v in p.items() if k in g or k in required or k in defaults}
    return p == g


def match_calls(
    gold: list[dict[str, Any]],
    pred: list[dict[str, Any]],
    mode: str = "value",
    schemas: dict[str, dict[str, Any]] | None = None,
    extra: str = "ignore",
) -> dict[str, int]:
    """``t_hits``, ``p_hits``, ``gt_calls`` and ``extra_calls`` (predicted calls matched to no
    gold call by name) of one call turn."""
    schemas = schemas or {}
    used_t: set[int] = set()
    t_hits = 0
    for g in gold:
        j = next((j for j, p in enumerate(pred) if j not in used_t and p["name"] == g["name"]), None)
        if j is not None:
            used_t.add(j)
            t_hits += 1
    used_p: set[int] = set()
    p_hits = 0
    for g in gold:
        j = next(
            (j for j, p in enumerate(pred) if j not in used_p and p["name"] == g["name"]
             and params_equal(p.get("parameters"), g.get("parameters"), mode, schemas.get(g["name"]))),
            None,
        )
        if j is not None:
            used_p.add(j)
            p_hits += 1
    extra_calls = len(pred) - t_hits
    if extra == "penalise" and extra_calls:
        t_hits = p_hits = 0
    return {"t_hits": t_hits, "p_hits": p_hits, "gt_calls": len(gold), "extra_calls": extra_calls}


def invokes_tool(pred: list[dict[str, Any]], irr_meta_tool: str = "invocation") -> bool:
    """Whether a chat-turn reply invokes a tool (get_user_input is abstention, Fig 19)."""
    for call in pred:
        if call["name"] == GET_USER_INPUT_NAME:
            continue
        if call["name"] in (META_TOOL_NAME, TOOLSEARCHER_NAME) and irr_meta_tool == "abstain":
            continue
        return True
    return False


def is_retriever_call(call: dict[str, Any], retriever: str = "meta_tool") -> bool:
    """A well-formed retriever call: meta_tool with a ``tool_description`` string and a
    ``param_description`` list of strings, or (keyword baseline) ToolSearcher with ``keywords``."""
    params = call.get("parameters")
    if not isinstance(params, dict):
        return False
    if retriever == "keyword":
        return call["name"] == TOOLSEARCHER_NAME and isinstance(params.get("keywords"), str)
    return (
        call["name"] == META_TOOL_NAME
        and isinstance(params.get("tool_description"), str)
        and isinstance(params.get("param_description"), list)
        and all(isinstance(p, str) for p in params["param_description"])
    )


def fmd(n_retriever_calls: int, n_gold: int, unit: str = "turn") -> tuple[int, int]:
    """(hits, units) of FMD at one meta_tool turn. ``turn``: one unit, met by any well-formed
    retriever call (a success of "this meta-tool function calling"). ``gold_tool``: one unit
    per gold missing tool, each retriever call meeting at most one."""
    if unit == "turn":
        return int(n_retriever_calls > 0), 1
    return min(n_retriever_calls, n_gold), n_gold


def max_matching(edges: list[set[int]], n_right: int) -> int:
    """Size of a maximum bipartite matching (left i -> right j in edges[i]); Kuhn's algorithm."""
    match_right = [-1] * n_right

    def augment(i: int, seen: set[int]) -> bool:
        for j in sorted(edges[i]):
            if j in seen:
                continue
            seen.add(j)
            if match_right[j] < 0 or augment(match_right[j], seen):
                match_right[j] = i
                return True
        return False

    return sum(augment(i, set()) for i in range(len(edges)))


def hits_at_k(rankings: list[list[str]], gold: list[str], k: int, matching: str = "retrieved_set") -> int:
    """Gold tools found in the top-k of the retriever calls' rankings: ``retrieved_set`` = in
    the union of every call's top-k; ``bipartite`` = each call's top-k serves one gold tool."""
    if matching == "retrieved_set":
        retrieved = {name for r in rankings for name in r[:k]}
        return sum(g in retrieved for g in gold)
    edges = [{j for j, g in enumerate(gold) if g in r[:k]} for r in rankings]
    return max_matching(edges, len(gold))
