"""Meta-Bench's report tables in the layout of the paper's Tables 2 and 3 (one row per difficulty
for the model under test; percentages with two decimals, pooled over units as the paper's
denominators imply: T/P-Acc per gold call, IRR per chat turn, FMD per meta_tool turn (or per
gold missing tool, ``fmd_unit``), HR@k per gold missing tool)."""

from __future__ import annotations

from collections import defaultdict

from pytest_toolbench.results.aggregate import ReportTable
from pytest_toolbench.results.case_result import CaseResult

DIFFICULTIES = ("simple", "hard")
TABLE2_COLUMNS = [
    ("open-world FM T-Acc", ("open", ("function_missing",)), "t_hits", "gt_calls"),
    ("FM P-Acc", ("open", ("function_missing",)), "p_hits", "gt_calls"),
    ("FE T-Acc", ("open", ("function_existing",)), "t_hits", "gt_calls"),
    ("FE P-Acc", ("open", ("function_existing",)), "p_hits", "gt_calls"),
    ("open-world Chat IRR", ("open", ("chat",)), "irr_correct", None),
    ("closed-world Single/Multi T-Acc", ("closed", ("single_tool_call", "multi_tool_call")), "t_hits", "gt_calls"),
    ("Single/Multi P-Acc", ("closed", ("single_tool_call", "multi_tool_call")), "p_hits", "gt_calls"),
    ("closed-world Chat IRR", ("closed", ("chat",)), "irr_correct", None),
]
TABLE3_METRICS = [("FMD", "fmd_hits"), ("HR@1", "hr_1_hits"), ("HR@3", "hr_3_hits"), ("HR@5", "hr_5_hits")]


def _pct(num: float, den: float) -> float | None:
    return round(100.0 * num / den, 2) if den else None


def _pooled(results: list[CaseResult], numerator: str, denominator: str | None) -> float | None:
    have = [r for r in results if numerator in r.values and (denominator is None or denominator in r.values)]
    num = sum(r.values[numerator] for r in have)
    den = sum(r.values[denominator] for r in have) if denominator else len(have)
    return _pct(num, den)


def _index(results: list[CaseResult]) -> dict[tuple[str, str, str], list[CaseResult]]:
    out: dict[tuple[str, str, str], list[CaseResult]] = defaultdict(list)
    for r in results:
        if r.is_error:
            continue
        key = (str(r.labels.get("difficulty")), str(r.labels.get("world")), str(r.labels.get("category")))
        out[key].append(r)
    return out


def _model(results: list[CaseResult]) -> str:
    names = sorted({r.model for r in results if r.model})
    return ", ".join(names) or "model"


def table2(results: list[CaseResult]) -> ReportTable:
    by = _index(results)
    model = _model(results)
    rows: list[list[str | float | int | None]] = []
    values: dict[str, float | None] = {}
    for difficulty in DIFFICULTIES:
        row: list[str | float | int | None] = [f"{difficulty.capitalize()}: {model}"]
        for title, (world, cats), num, den in TABLE2_COLUMNS:
            members = [r for c in cats for r in by.get((difficulty, world, c), [])]
            v = _pooled(members, num, den)
            row.append(v)
            values[f"{difficulty}.{world}.{'_'.join(cats)}.{num}"] = v
        rows.append(row)
    return ReportTable(
        benchmark="metabench", name="table2", title="Meta-Bench: common function calling (%, paper Table 2)",
        columns=["setting / model", *(c[0] for c in TABLE2_COLUMNS)], rows=rows, values=values,
        note="T/P-Acc per gold call, IRR per chat turn (teacher forcing, paper Fig. 18); n/a = no such cases",
    )


def table3(results: list[CaseResult]) -> ReportTable:
    by = _index(results)
    model = _model(results)
    retrievers = sorted({str(r.details.get("retriever")) for r in results if r.details.get("retriever")})
    method = {"meta_tool": "Meta-Tool", "keyword": "Keyword", "dialogue_history": "Dialogue-history"}
    label = ", ".join(method.get(r, r) for r in retrievers) or "Meta-Tool"
    row: list[str | float | int | None] = [f"{label}: {model}"]
    values: dict[str, float | None] = {}
    for difficulty in DIFFICULTIES:
        members = by.get((difficulty, "open", "function_missing"), [])
        for title, num in TABLE3_METRICS:
            v = _pooled(members, num, "fmd_units" if num == "fmd_hits" else "gt_missing")
            row.append(v)
            values[f"{difficulty}.{title.lower().replace('@', '_')}"] = v
    unit_names = {"turn": "meta_tool turn", "gold_tool": "gold missing tool"}
    units = sorted({unit_names.get(str(u), str(u)) for r in results if (u := r.details.get("fmd_unit"))})
    note = f"FMD per {' / '.join(units) or 'meta_tool turn'}, HR@k per gold missing tool; "
    if model == "oracle":
        note += "oracle run: the queries are the gold meta_tool calls, so HR@k is the retriever's own hit rate"
    else:
        note += "HR@k measures the retriever on this model's queries"
    embedders = sorted({str(r.details.get("embedder")) for r in results if r.details.get("embedder")})
    alphas = sorted({str(r.details.get("alpha")) for r in results if r.details.get("alpha") is not None})
    note += f" (embedder {', '.join(embedders) or '?'}, alpha {', '.join(alphas) or '?'})"
    return ReportTable(
        benchmark="metabench", name="table3", title="Meta-Bench: function missing retrieval (%, paper Table 3)",
        columns=["method: model", *(f"Simple {t}" for t, _ in TABLE3_METRICS), *(f"Hard {t}" for t, _ in TABLE3_METRICS)],
        rows=[row], values=values, note=note,
    )


def report_tables(results: list[CaseResult]) -> list[ReportTable]:
    return [table2(results), table3(results)]
