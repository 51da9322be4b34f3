"""FamilyTool metrics, exactly as upstream computes them.

KG extraction (upstream ``metric_KG_extraction``): EM, F1, Format Error, No-Hallucination and
Coverage on link *sets*. Tool use (UnifiedToolHub ``benchmark/metrics.py`` ``metrics_for_single_round_tool_call``
with ``is_strict=True``): EM, Tool Acc, Value Acc with strict ``json.dumps`` equality per golden
key, Value Acc 0 when the gold tool was not called, extra calls not penalised.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from pytest_toolbench.benchmarks.familytool.extraction import BAD
from pytest_toolbench.benchmarks.familytool.schema import split_links


def link_set(links: Iterable[Sequence[str]]) -> set[str]:
    return {"<>".join(link) for link in links}


def extraction_values(
    golden_links: Sequence[Sequence[str]], extraction_text: str, golden_calls: list[dict[str, Any]]
) -> dict[str, float]:
    """Per-sample values; ``clean``/``parsed`` feed No-Hallucination's ratio (denominator = samples
    that are not format errors)."""
    gold = link_set(golden_links)
    extracted_links = split_links(extraction_text)
    pred = link_set(extracted_links)
    tp = len(gold & pred)
    precision = tp / len(pred) if pred else 0.0
    recall = tp / len(gold) if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    format_error = extraction_text == ""
    calls_repr = str(golden_calls)
    used = {e for link in golden_links for e in (link[0], link[-1]) if e in calls_repr}
    extracted_entities = {e for link in extracted_links for e in (link[0], link[-1])}
    covered = all(e in extracted_entities for e in used)
    return {
        "em": 1.0 if pred == gold else 0.0,
        "f1": f1,
        "format_error": 1.0 if format_error else 0.0,
        "parsed": 0.0 if format_error else 1.0,
        "clean": 1.0 if not format_error and BAD not in extraction_text else 0.0,
        "coverage": 1.0 if covered else 0.0,
    }


def _by_name(calls: Iterable[Any]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = {}
    for call in calls:
        if not isinstance(call, dict) or "name" not in call or "parameters" not in call:
            continue
        params = call["parameters"]
        if isinstance(params, dict):  # strict mode: only top-level keys are stripped
            params = {k.strip() if isinstance(k, str) else k: v for k, v in params.items()}
        grouped.setdefault(str(call["name"]).strip(), []).append(params)
    return grouped


def _sort_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def tooluse_values(golden: list[dict[str, Any]], predicted: list[dict[str, Any]]) -> dict[str, float]:
    """``metrics_for_single_round_tool_call`` (is_strict=True): EM = ExactMatch-AllTools,
    ``em_per_tool`` = ExactMatch-PerTool (all_matched / number of gold calls), Tool Acc, Value Acc.
    Where upstream would raise (a non-dict argument value) the call matches no value here."""
    gold, pred = _by_name(golden), _by_name(predicted)
    if not gold:  # upstream: every metric is 1 iff the model called nothing either
        empty = 1.0 if not pred else 0.0
        return {"em": empty, "em_per_tool": empty, "tool_acc": empty, "value_acc": empty}
    tool_matches = all_matched = matched_params = total_params = 0
    for name, gold_args in gold.items():
        if name not in pred:
            continue
        tool_matches += 1
        matched = False
        for g, p in zip(sorted(gold_args, key=_sort_key), sorted(pred[name], key=_sort_key)):
            p = p if isinstance(p, dict) else {}  # upstream would crash on a non-dict
            matched = True
            for key, value in (g.items() if isinstance(g, dict) else ()):
                total_params += 1
                if json.dumps(p.get(key)) == json.dumps(value):
                    matched_params += 1
                else:
                    matched = False
        all_matched += matched
    per_tool = all_matched / len(golden)
    return {
        "em": 1.0 if per_tool == 1 else 0.0,
        "em_per_tool": float(per_tool),
        "tool_acc": tool_matches / len(gold),
        "value_acc": matched_params / total_params if total_params else 0.0,
    }
