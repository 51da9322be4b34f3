"""Statistics over repeated runs of each case (``--repeats K``).

* **Mean over all repeats, CI over cases.** The K runs of one case are correlated, so the
  bootstrap resamples whole cases (a cluster bootstrap): each case becomes one cluster holding the
  sums of its repeats' values, and a mean metric becomes ``sum(values) / count(values)`` over the
  drawn clusters. The point estimate is the plain mean over every scored repeat; only the interval
  differs from treating repeats as independent (which would make it too narrow).
* **pass@k and pass^k** for binary metrics (a mean metric whose per-case values in this run are
  all 0 or 1; inferred from the values, as MetricSpec does not declare it, so a continuous score
  that only took the values 0 and 1 in a run is treated as binary there) where a 1 is a pass:
  not an error rate (``higher_is_better=False``: ToolHop's query_error_rate, FamilyTool's
  format_error), whose "pass@3" read as passing was the chance of an error in one of 3 runs:
  per case, with n scored repeats of which c are 1, the unbiased estimators
  ``pass@k = 1 - C(n-c, k) / C(n, k)`` (at least one of k draws passes; Chen et al. 2021) and
  ``pass^k = C(c, k) / C(n, k)`` (all k draws pass; tau-bench), averaged over cases with n >= k.
* **Unstable cases**: cases whose outcome (passed / failed; infrastructure errors ignored) differs
  across repeats, with the binary metrics (error rates included) whose value differed.
* **Benchmark tables per repeat.** Benchmark tables (``HasReportTables``) are computed from one
  repeat's results at a time, exactly as for a run without repeats (ToolBeHonest's positional
  tables and error counts would otherwise see every case K times); the table shown is the cell-wise
  mean over repeats, and each repeat's own tables are kept in the JSON report.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from math import comb
from typing import Any

from pydantic import Field

from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.results.aggregate import ReportTable, RunMetrics, aggregate
from pytest_toolbench.results.bootstrap import bootstrap_mean
from pytest_toolbench.results.case_result import CaseResult, Outcome
from pytest_toolbench.results.metrics import MetricSpec

#: Per-cluster count of a mean metric's values (the denominator of the cluster ratio).
_COUNT_SUFFIX = "#n"


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k draws (without replacement) from n runs, c correct,
    is correct: ``1 - C(n-c, k) / C(n, k)``."""
    _check(n, c, k)
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Probability that all k draws from n runs, c correct, are correct: ``C(c, k) / C(n, k)``."""
    _check(n, c, k)
    return comb(c, k) / comb(n, k)


def _check(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")


def base_case_id(result: CaseResult) -> str:
    """The case id without its ``-r<repeat>`` suffix."""
    suffix = f"-r{result.repeat}" if result.repeat is not None else ""
    if suffix and result.case_id.endswith(suffix):
        return result.case_id[: -len(suffix)]
    return result.case_id


class PassAtK(DeferredModel):
    k: int
    #: Mean over cases of the unbiased per-case estimate, with a bootstrap CI over cases.
    pass_at: float | None
    pass_at_ci: tuple[float | None, float | None] = (None, None)
    pass_hat: float | None
    pass_hat_ci: tuple[float | None, float | None] = (None, None)
    #: Cases with at least k scored repeats (the others cannot give an estimate).
    n_cases: int


class BinaryMetricRepeats(DeferredModel):
    metric: str
    #: Mean over every scored repeat (the same number as the metric table's value).
    mean: float | None
    by_k: list[PassAtK]


class UnstableCase(DeferredModel):
    case_id: str  # without the repeat suffix
    benchmark: str
    scenario: str
    #: Outcome of repeat 1..K in order ("passed" / "failed" / "error"; "missing" if it never ran).
    outcomes: list[str]
    n_passed: int
    n_scored: int
    #: Binary metrics whose per-case value differed across the scored repeats.
    metrics: list[str] = Field(default_factory=list)


class ScenarioRepeats(DeferredModel):
    benchmark: str
    scenario: str
    n_cases: int  # distinct cases (not runs)
    binary: list[BinaryMetricRepeats]
    n_unstable: int


class RepeatStats(DeferredModel):
    repeats: int
    scenarios: list[ScenarioRepeats]
    unstable: list[UnstableCase]
    #: Each repeat's own benchmark tables (``<name>.r<k>``); the metric tables show their mean.
    per_repeat_tables: list[ReportTable] = Field(default_factory=list)


# --------------------------------------------------------------------------- grouping
def group_repeats(results: Iterable[CaseResult]) -> dict[tuple[str, str, str], list[CaseResult]]:
    """(benchmark, scenario, base case id) -> that case's runs, ordered by repeat."""
    groups: dict[tuple[str, str, str], list[CaseResult]] = defaultdict(list)
    for r in results:
        groups[(r.benchmark, r.scenario, base_case_id(r))].append(r)
    return {k: sorted(v, key=lambda r: (r.repeat or 0, r.case_id)) for k, v in sorted(groups.items())}


def _cluster(runs: Sequence[CaseResult]) -> CaseResult:
    """One case's runs as one result: each value summed over the scored runs, plus a count per
    value (``<value>#n``), so a mean becomes a ratio of sums over clusters."""
    first = runs[0]
    scored = [r for r in runs if not r.is_error]
    values: dict[str, float] = {}
    for r in scored:
        for key, v in r.values.items():
            values[key] = values.get(key, 0.0) + v
            values[key + _COUNT_SUFFIX] = values.get(key + _COUNT_SUFFIX, 0.0) + 1.0
    return CaseResult(
        case_id=base_case_id(first),
        benchmark=first.benchmark,
        scenario=first.scenario,
        model=first.model,
        outcome=Outcome.ERROR if not scored else Outcome.PASSED,
        labels=first.labels,
        values=values,
    )


def _cluster_spec(spec: MetricSpec) -> MetricSpec:
    if spec.kind == "ratio":
        return spec  # sum(num) / sum(den) over clusters is the pooled ratio already
    return spec.model_copy(
        update={"kind": "ratio", "denominator": spec.value + _COUNT_SUFFIX}
    )


def aggregate_repeats(
    results: Iterable[CaseResult],
    metric_specs: dict[str, tuple[MetricSpec, ...]],
    breakdown_labels: dict[str, tuple[str, ...]],
    *,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    scenario_order: dict[str, tuple[str, ...]] | None = None,
) -> RunMetrics:
    """Like :func:`~pytest_toolbench.results.aggregate.aggregate`, for repeated runs: counts
    (``n_cases``, errors, parse failures) are over runs; each metric is the mean over all scored
    runs with a cluster-bootstrap CI over cases, and its ``n`` counts cases, not runs."""
    results = list(results)
    kw: dict[str, Any] = {"seed": seed, "confidence": confidence, "scenario_order": scenario_order}
    by_run = aggregate(results, metric_specs, breakdown_labels, n_boot=1, **kw)
    clusters = [_cluster(runs) for runs in group_repeats(results).values()]
    specs = {b: tuple(_cluster_spec(s) for s in ss) for b, ss in metric_specs.items()}
    by_case = aggregate(clusters, specs, breakdown_labels, n_boot=n_boot, **kw)

    def swap(target: dict, source: dict) -> None:
        for name, mv in target.items():
            if name in source:
                target[name] = source[name].model_copy(
                    update={"is_rate": mv.is_rate, "higher_is_better": mv.higher_is_better}
                )

    for s in by_run.scenarios:
        c = by_case.scenario(s.benchmark, s.scenario)
        if c is None:
            continue
        swap(s.metrics, c.metrics)
        for label, groups in s.breakdown.items():
            cg = {g.group: g for g in c.breakdown.get(label, [])}
            for g in groups:
                if g.group in cg:
                    swap(g.metrics, cg[g.group].metrics)
    return by_run


# --------------------------------------------------------------------------- pass@k, unstable
def _binary_specs(specs: Sequence[MetricSpec], scored: Sequence[CaseResult]) -> list[MetricSpec]:
    out = []
    for spec in specs:
        if spec.kind != "mean":
            continue
        vals = [r.values[spec.value] for r in scored if spec.value in r.values]
        if vals and all(v in (0.0, 1.0) for v in vals):
            out.append(spec)
    return out


def _mean_ci(xs: list[float], n_boot: int, seed: int) -> tuple[float | None, tuple]:
    est = bootstrap_mean(xs, n_boot=max(1, n_boot), seed=seed)
    return est.value, (est.ci_low, est.ci_high)


def repeat_stats(
    results: Iterable[CaseResult],
    metric_specs: dict[str, tuple[MetricSpec, ...]],
    repeats: int,
    *,
    n_boot: int = 2000,
    seed: int = 0,
    scenario_order: dict[str, tuple[str, ...]] | None = None,
) -> RepeatStats:
    """pass@k / pass^k (k = 1..repeats) per binary metric and scenario, and the unstable cases."""
    groups = group_repeats(results)
    by_scenario: dict[tuple[str, str], list[list[CaseResult]]] = defaultdict(list)
    for (benchmark, scenario, _), runs in groups.items():
        by_scenario[(benchmark, scenario)].append(runs)
    order = scenario_order or {}

    def position(key: tuple[str, str]) -> tuple[str, int, str]:
        declared = order.get(key[0], ())
        return key[0], declared.index(key[1]) if key[1] in declared else len(declared), key[1]

    scenarios: list[ScenarioRepeats] = []
    unstable: list[UnstableCase] = []
    for (benchmark, scenario) in sorted(by_scenario, key=position):
        cases = by_scenario[(benchmark, scenario)]
        specs = [s for s in metric_specs.get(benchmark, ()) if s.applies_to(scenario)]
        scored_all = [r for runs in cases for r in runs if not r.is_error]
        binary = _binary_specs(specs, scored_all)
        entries: list[BinaryMetricRepeats] = []
        for spec in (b for b in binary if b.higher_is_better):
            counts = []  # (n, c) per case
            for runs in cases:
                vals = [r.values[spec.value] for r in runs if not r.is_error and spec.value in r.values]
                if vals:
                    counts.append((len(vals), int(sum(vals))))
            total = sum(n for n, _ in counts)
            mean = sum(c for _, c in counts) / total if total else None
            by_k = []
            for k in range(1, repeats + 1):
                eligible = [(n, c) for n, c in counts if n >= k]
                at, at_ci = _mean_ci([pass_at_k(n, c, k) for n, c in eligible], n_boot, seed)
                hat, hat_ci = _mean_ci([pass_hat_k(n, c, k) for n, c in eligible], n_boot, seed)
                by_k.append(PassAtK(k=k, pass_at=at, pass_at_ci=at_ci, pass_hat=hat,
                                    pass_hat_ci=hat_ci, n_cases=len(eligible)))
            entries.append(BinaryMetricRepeats(metric=spec.name, mean=mean, by_k=by_k))
        n_unstable = 0
        for runs in cases:
            case = _unstable(runs, binary, repeats)
            if case is not None:
                unstable.append(case)
                n_unstable += 1
        scenarios.append(ScenarioRepeats(benchmark=benchmark, scenario=scenario,
                                         n_cases=len(cases), binary=entries, n_unstable=n_unstable))
    return RepeatStats(repeats=repeats, scenarios=scenarios, unstable=unstable)


def _unstable(runs: list[CaseResult], binary: list[MetricSpec], repeats: int) -> UnstableCase | None:
    scored = [r for r in runs if not r.is_error]
    differing = [
        spec.name for spec in binary
        if len({r.values[spec.value] for r in scored if spec.value in r.values}) > 1
    ]
    if len({r.outcome for r in scored}) <= 1 and not differing:
        return None
    by_repeat = {r.repeat: r.outcome.value for r in runs}
    first = runs[0]
    return UnstableCase(
        case_id=base_case_id(first), benchmark=first.benchmark, scenario=first.scenario,
        outcomes=[by_repeat.get(k, "missing") for k in range(1, repeats + 1)],
        n_passed=sum(r.outcome is Outcome.PASSED for r in scored), n_scored=len(scored),
        metrics=differing,
    )


# --------------------------------------------------------------------------- benchmark tables
def tables_per_repeat(
    report_tables: Any, results: Sequence[CaseResult]
) -> tuple[list[ReportTable], list[ReportTable]]:
    """``(shown, per_repeat)``: the benchmark's tables computed on each repeat alone, and their
    cell-wise mean (tables whose layout differs between repeats are shown per repeat instead)."""
    by_repeat: dict[int, list[CaseResult]] = defaultdict(list)
    for r in results:
        by_repeat[r.repeat or 1].append(r)
    per: dict[int, list[ReportTable]] = {
        k: report_tables(sorted(rs, key=lambda r: r.case_id)) for k, rs in sorted(by_repeat.items())
    }
    per_repeat = [
        t.model_copy(update={"name": f"{t.name}.r{k}", "title": f"{t.title} (repeat {k})"})
        for k, tables in per.items() for t in tables
    ]
    shown: list[ReportTable] = []
    lists = list(per.values())
    for i in range(max(len(ts) for ts in lists) if lists else 0):
        same = [ts[i] for ts in lists if i < len(ts)]
        mean = _mean_table(same) if len(same) == len(lists) else None
        if mean is not None:
            shown.append(mean)
        else:
            shown += [t for t in per_repeat if t.name.rsplit(".r", 1)[0] == same[0].name]
    return shown, per_repeat


def _mean_table(tables: list[ReportTable]) -> ReportTable | None:
    first = tables[0]
    if len(tables) == 1:
        return first
    if any(t.name != first.name or t.columns != first.columns or len(t.rows) != len(first.rows)
           for t in tables):
        return None
    rows = []
    for cells in zip(*(t.rows for t in tables)):  # the same row of every repeat's table
        if len({len(row) for row in cells}) != 1:
            return None
        row = []
        for column in zip(*cells):  # one cell across repeats
            numbers = [v for v in column if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if len(numbers) == len(column):
                mean = sum(numbers) / len(numbers)
                whole = all(isinstance(v, int) for v in numbers) and mean == int(mean)
                row.append(int(mean) if whole else round(mean, 4))  # counts stay counts
            elif len({str(v) for v in column}) == 1:
                row.append(column[0])
            elif numbers and all(v is None or v in numbers for v in column):
                row.append(None)  # undefined in some repeat: no mean
            else:
                return None
        rows.append(row)
    values: dict[str, float | None] = {}
    for key in first.values:
        vs = [t.values.get(key) for t in tables]
        values[key] = None if any(v is None for v in vs) else sum(vs) / len(vs)  # type: ignore[arg-type]
    note = (first.note + "; " if first.note else "") + f"mean of {len(tables)} repeats, each scored alone"
    return first.model_copy(update={"rows": rows, "values": values, "note": note,
                                    "title": f"{first.title} (mean of {len(tables)} repeats)"})
