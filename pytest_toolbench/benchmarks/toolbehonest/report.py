"""The paper's tables from scored cases (upstream ``utils/calculate_metrics.py``) and the Overall from scenario numbers.

* Leaderboard (paper Table 2, ``calculate_group_results``): unsolvable variant only; per
  scenario the mean of L1 EM, L2 PR, L3 PR and L3 MS over its records; Overall is the pooled
  mean of all 4 x N numbers, i.e. scenarios weighted by record count (150/100/100), NOT the
  mean of scenario means.
* Solvable vs unsolvable (paper Table 3, §3.8): solvable L1/L2/L3 = mean EM/PR/L3-PR, Overall
  their mean; unsolvable L3 = mean(L3 PR, L3 MS), Overall = the Table 2 Overall.
* Error analysis (``calculate_analysis_results``): counts of each condition per level and
  scenario. Labels read "Level 2 / MNT" (upstream prints "LeveL 2 / MNT", a replace() quirk;
  the counts are the same).

Numbers are shown x100 with two decimals, as the paper's tables are compared at +-0.05 on that scale. A
record whose unsolvable gold plan has no UnsolvableQuery step has a nan MS, so its scenario's
L3-MS and the Overall (and Table 3's unsolvable L3 and Overall) print ``nan`` as upstream's
tables do; the leaderboard note names such records (``utils/calculate_metrics.py``, ``--toolbehonest-empty-ms``).
``python -m pytest_toolbench.benchmarks.toolbehonest.report FILE.json`` recomputes the
leaderboard's Overall from per-scenario numbers (see :func:`main`): the paper's 150/100/100
weights for a per-model file such as Table 2, a run's own record counts for its JSON report.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from pytest_toolbench.benchmarks.toolbehonest.schema import SCENARIOS
from pytest_toolbench.benchmarks.toolbehonest.scoring import CONDITION_LABELS
from pytest_toolbench.results.aggregate import ReportTable
from pytest_toolbench.results.case_result import CaseResult

LEADERBOARD_METRICS = ("l1_em", "l2_pr", "l3_pr", "l3_ms")
METRIC_TITLES = {"l1_em": "L1-EM", "l2_pr": "L2-PR", "l3_pr": "L3-PR", "l3_ms": "L3-MS"}
#: Records per scenario in the real data (ToolBH paper, Table 1): the weights of upstream's Overall.
PAPER_COUNTS = {"MNT": 150, "PT": 100, "LFT": 100}
BENCHMARK = "toolbehonest"


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _pct(x: float | None) -> float | None:
    return None if x is None else round(100 * x, 2)


def overall_from_scenarios(
    scenarios: dict[str, dict[str, float]], counts: dict[str, int] | None = None
) -> float:
    """Upstream's Overall from per-scenario means: sum_s n_s * avg4(s) / sum_s n_s (``utils/calculate_metrics.py``).

    ``scenarios`` maps MNT/PT/LFT to ``{l1_em, l2_pr, l3_pr, l3_ms}`` (any scale; the result has
    the same scale); ``counts`` are the records per scenario (default 150/100/100)."""
    counts = counts or PAPER_COUNTS
    total = weight = 0.0
    for name, cells in scenarios.items():
        missing = [m for m in LEADERBOARD_METRICS if m not in cells]
        if missing:
            raise ValueError(f"scenario {name!r} lacks {missing}")
        if name not in counts:
            raise ValueError(f"no record count for scenario {name!r}")
        total += counts[name] * sum(cells[m] for m in LEADERBOARD_METRICS) / 4
        weight += counts[name]
    if not weight:
        raise ValueError("no scenarios given")
    return total / weight


def _unsolvable(results: list[CaseResult]) -> list[CaseResult]:
    return [r for r in results if not r.is_error and not r.labels.get("solvable")]


def _record_id(case_id: str) -> str:
    """``toolbehonest-os-1-L3-unsolvable`` (``-r2`` with repeats) -> ``os-1``."""
    return case_id.removeprefix(f"{BENCHMARK}-").split("-L", 1)[0]


def nan_ms_note(unsolvable: list[CaseResult]) -> str:
    """Why a cell reads nan (or which records a ``skip`` left out): a record whose unsolvable
    gold plan has no UnsolvableQuery step has a nan MS, as upstream (np.mean of no scores), and
    nan carries into L3-MS and the Overall; ``--toolbehonest-empty-ms skip`` leaves it out."""
    empty = [r for r in unsolvable if "matching_score" in r.details]
    nan_ids = sorted({_record_id(r.case_id) for r in empty if "l3_ms" in r.values})
    skipped = sorted({_record_id(r.case_id) for r in empty if "l3_ms" not in r.values})
    note = ""
    if nan_ids:
        note += (f"; nan as upstream: no UnsolvableQuery step in the unsolvable gold plan of "
                 f"{_ids(nan_ids)} (its L3 MS is np.mean of no scores; --toolbehonest-empty-ms "
                 "skip leaves such records out)")
    if skipped:
        note += (f"; left out of L3-MS and the Overall (--toolbehonest-empty-ms skip; upstream: "
                 f"nan): {_ids(skipped)}")
    return note


def _ids(ids: list[str]) -> str:
    return ", ".join(ids[:5]) + (f", ... ({len(ids)} in all)" if len(ids) > 5 else "")


def leaderboard(results: list[CaseResult], model: str = "") -> ReportTable:
    """Paper Table 2 layout: one row, MNT/PT/LFT x (L1-EM, L2-PR, L3-PR, L3-MS), Overall."""
    unsolvable = _unsolvable(results)
    columns = ["Model"]
    row: list[Any] = [model or (results[0].model if results else "")]
    values: dict[str, float | None] = {}
    for scenario in SCENARIOS:
        cases = [r for r in unsolvable if r.scenario == scenario]
        for metric in LEADERBOARD_METRICS:
            v = _mean([r.values[metric] for r in cases if metric in r.values])
            columns.append(f"{scenario} {METRIC_TITLES[metric]}")
            row.append(_pct(v))
            values[f"{scenario}.{metric}"] = v
    num = sum(r.values.get("overall_sum", 0.0) for r in unsolvable)
    den = sum(r.values.get("overall_n", 0.0) for r in unsolvable)
    overall = num / den if den else None
    columns.append("Overall")
    row.append(_pct(overall))
    values["overall"] = overall
    present = {r.scenario for r in unsolvable}
    note = "x100; unsolvable variant only; Overall = pooled mean of all L1/L2/L3-PR/L3-MS numbers"
    if present != set(SCENARIOS):
        note += f" (only {sorted(present)} in this run)"
    note += nan_ms_note(unsolvable)
    return ReportTable(
        benchmark=BENCHMARK, name="leaderboard", title="Leaderboard (paper Table 2)",
        columns=columns, rows=[row], note=note, values=values,
    )


def solvability_table(results: list[CaseResult]) -> ReportTable:
    """Paper Table 3: solvable vs unsolvable per level and Overall (upstream never tabulates it)."""
    scored = [r for r in results if not r.is_error]

    def mean_of(key: str) -> float | None:
        return _mean([r.values[key] for r in scored if key in r.values])

    s1, s2, s3 = mean_of("l1_em_solvable"), mean_of("l2_pr_solvable"), mean_of("l3_pr_solvable")
    s_all = [x for x in (s1, s2, s3) if x is not None]
    u1, u2, u3pr, u3ms = (mean_of(m) for m in LEADERBOARD_METRICS)
    u3 = _mean([x for x in (u3pr, u3ms) if x is not None])
    unsolvable = _unsolvable(results)
    den = sum(r.values.get("overall_n", 0.0) for r in unsolvable)
    u_all = sum(r.values.get("overall_sum", 0.0) for r in unsolvable) / den if den else None
    solv_overall = _mean(s_all) if len(s_all) == 3 else None
    rows = [
        ["solvable", _pct(s1), _pct(s2), _pct(s3), _pct(solv_overall)],
        ["unsolvable", _pct(u1), _pct(u2), _pct(u3), _pct(u_all)],
    ]
    values = {
        "solvable.l1": s1, "solvable.l2": s2, "solvable.l3": s3, "solvable.overall": solv_overall,
        "unsolvable.l1": u1, "unsolvable.l2": u2, "unsolvable.l3": u3, "unsolvable.overall": u_all,
    }
    return ReportTable(
        benchmark=BENCHMARK, name="solvability", title="Solvable vs unsolvable (paper Table 3)",
        columns=["Variant", "L1", "L2", "L3", "Overall"], rows=rows, values=values,
        note="x100; solvable L3 = L3-PR (no MS); unsolvable L3 = mean(L3-PR, L3-MS)",
    )


def error_analysis(results: list[CaseResult]) -> ReportTable:
    """Counts of each condition over unsolvable L2 and L3 cases, per scenario and Overall."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(CONDITION_LABELS, 0))
    unsolvable = _unsolvable(results)
    for level in (2, 3):
        for group in (*SCENARIOS, "Overall"):
            label = f"Level {level} / {group}"
            counts[label]  # every row shown, zeros included
            for r in unsolvable:
                if int(r.labels.get("level", 0)) != level:
                    continue
                if group != "Overall" and r.scenario != group:
                    continue
                condition = r.details.get("condition")
                if condition in CONDITION_LABELS:
                    counts[label][condition] += 1
    rows = [[label, *c.values()] for label, c in counts.items()]
    values = {f"{label}.{k}": float(v) for label, c in counts.items() for k, v in c.items()}
    return ReportTable(
        benchmark=BENCHMARK, name="error_analysis", title="Error analysis (unsolvable, counts)",
        columns=["Level / Scenario", *CONDITION_LABELS.values()], rows=rows, values=values,
        note="upstream labels these rows 'LeveL 2 / ...' (a str.replace quirk)",
    )


def report_tables(results: list[CaseResult]) -> list[ReportTable]:
    return [leaderboard(results), solvability_table(results), error_analysis(results)]


# --------------------------------------------------------------------------- aggregate CLI


def scenarios_from_json(
    data: dict[str, Any],
) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, int] | None]:
    """Rows to recompute from a JSON file, and the weights that belong to them.

    Either ``{model: {MNT: {l1_em, ...}, PT: ..., LFT: ...}}`` (e.g. the paper's Table 2; no
    counts of its own, so the paper's 150/100/100 apply), or a pytest-toolbench JSON report:
    its toolbehonest per-scenario metric values, weighted by the run's own record counts per
    scenario (the ``n`` of the unsolvable metrics), because upstream's Overall pools the run's
    records, and a sample or a selection does not have the paper's 150/100/100."""
    metrics = data.get("metrics")
    if isinstance(metrics, dict) and isinstance(metrics.get("scenarios"), list):
        row: dict[str, dict[str, float]] = {}
        counts: dict[str, int] = {}
        for s in metrics["scenarios"]:
            if s.get("benchmark") != BENCHMARK:
                continue
            present = [m for m in LEADERBOARD_METRICS if m in s["metrics"]]
            if not present:
                continue
            row[s["scenario"]] = {m: s["metrics"][m]["value"] for m in present}
            counts[s["scenario"]] = max(int(s["metrics"][m]["n"]) for m in present)
        if not row:
            raise ValueError("the JSON report has no toolbehonest scenario metrics")
        return {"run": row}, counts
    return data, None


def _parse_counts(text: str) -> dict[str, int]:
    try:
        return {k.strip(): int(v) for k, v in (item.split("=") for item in text.split(","))}
    except ValueError:
        raise SystemExit(f"--counts: expected e.g. MNT=150,PT=100,LFT=100, got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    """Print Overall for each row of a per-scenario results file (e.g. the paper's Table 2, or
    a run's own ``--toolbench-json`` report)."""
    parser = argparse.ArgumentParser(prog="python -m pytest_toolbench.benchmarks.toolbehonest.report")
    parser.add_argument("results", type=Path, help="JSON: {model: {MNT|PT|LFT: {l1_em, l2_pr, l3_pr, "
                        "l3_ms}}} or a pytest-toolbench JSON report")
    parser.add_argument("--counts", default=None, help="records per scenario, e.g. MNT=150,PT=100,LFT=100 "
                        "(default: a run report's own counts, else the paper's 150/100/100)")
    args = parser.parse_args(argv)
    try:
        rows, run_counts = scenarios_from_json(json.loads(args.results.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"{args.results}: {exc}") from None
    counts = _parse_counts(args.counts) if args.counts else run_counts or PAPER_COUNTS
    print("model\t" + "\t".join(f"{s} {METRIC_TITLES[m]}" for s in SCENARIOS for m in LEADERBOARD_METRICS) + "\tOverall")
    for model, scenarios in rows.items():
        cells = [scenarios.get(s, {}).get(m) for s in SCENARIOS for m in LEADERBOARD_METRICS]
        try:
            overall = overall_from_scenarios(scenarios, counts)
        except (KeyError, ValueError) as exc:
            raise SystemExit(f"{args.results}: row {model!r}: {exc}") from None
        print(model + "\t" + "\t".join("n/a" if c is None else f"{c:.4g}" for c in cells) + f"\t{overall:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
