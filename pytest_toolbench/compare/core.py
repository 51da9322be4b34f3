"""Compare runs case by case: per-run values with CIs, paired differences, McNemar.

Cases pair on (benchmark, scenario, case id); the model is not part of the key, so two models
on the same sample ids pair up. Cases present in one run only are counted in the coverage, never
silently dropped; a benchmark no run shares with the reference is named, not tabulated. A case
that ran more than once in a run (``--repeats``: ids ``<case>-r<k>``) is collapsed, under its
base id, to the mean of its scored repeats before pairing, so a repeated run pairs with a plain
one and with another repeated run case by case; McNemar then applies only where those means are
still 0/1.
Pure functions: the metric declarations come in as arguments (the CLI takes them from the
benchmark registry).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from pytest_toolbench.compare.changed_cases import CaseChanges, case_changes
from pytest_toolbench.compare.load import LoadedRun
from pytest_toolbench.results.comparison import (
    Comparison,
    MetricComparison,
    PairCoverage,
    PairedDiff,
    RunRef,
    RunValue,
    ScenarioComparison,
    UncomparedBenchmark,
)
from pytest_toolbench.compare.stats import (
    is_binary,
    mcnemar_from_outcomes,
    paired_bootstrap_mean_diff,
    paired_bootstrap_ratio_diff,
)
from pytest_toolbench.results.aggregate import MetricValue, RunMetrics, natural_key
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.metrics import MetricSpec
from pytest_toolbench.results.repeats import base_case_id

ScenarioKey = tuple[str, str]


class _Case:
    """A case collapsed over its repeats: mean values of its scored runs (None: all errored)."""

    __slots__ = ("values", "labels")

    def __init__(self, values: dict[str, float] | None, labels: dict[str, str]):
        self.values = values
        self.labels = labels


def _collapse(results: Sequence[CaseResult]) -> dict[ScenarioKey, dict[str, _Case]]:
    """Cases keyed by their base id (the ``-r<k>`` repeat suffix dropped), repeats averaged."""
    grouped: dict[ScenarioKey, dict[str, list[CaseResult]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        grouped[(r.benchmark, r.scenario)][base_case_id(r)].append(r)
    out: dict[ScenarioKey, dict[str, _Case]] = {}
    for key, by_id in grouped.items():
        cases: dict[str, _Case] = {}
        for case_id, reps in by_id.items():
            labels = {k: str(v) for k, v in reps[0].labels.items()}
            scored = [r for r in reps if not r.is_error]
            if not scored:
                cases[case_id] = _Case(None, labels)
                continue
            sums: dict[str, list[float]] = defaultdict(list)
            for r in scored:
                for name, v in r.values.items():
                    sums[name].append(v)
            cases[case_id] = _Case({k: sum(v) / len(v) for k, v in sums.items()}, labels)
        out[key] = cases
    return out


def _run_value(mv: MetricValue | None) -> RunValue | None:
    if mv is None:
        return None
    return RunValue(value=mv.value, ci_low=mv.ci_low, ci_high=mv.ci_high, n=mv.n)


def _reported(metrics: RunMetrics, key: ScenarioKey, metric: str, label: str | None,
              group: str | None) -> MetricValue | None:
    s = metrics.scenario(*key)
    if s is None:
        return None
    if label is None:
        return s.metrics.get(metric)
    g = next((g for g in s.breakdown.get(label, []) if g.group == group), None)
    return None if g is None else g.metrics.get(metric)


def _paired(
    spec: MetricSpec, ref: dict[str, _Case], other: dict[str, _Case], ids: Sequence[str],
    run: int, *, n_boot: int, seed: int, confidence: float,
) -> PairedDiff:
    needed = [spec.value] + ([spec.denominator] if spec.kind == "ratio" and spec.denominator else [])
    rows: list[tuple[list[float], list[float]]] = []
    for cid in ids:
        a, b = ref[cid].values, other[cid].values
        if a is None or b is None or any(k not in a or k not in b for k in needed):
            continue
        rows.append(([a[k] for k in needed], [b[k] for k in needed]))
    kw = {"n_boot": n_boot, "seed": seed, "confidence": confidence}
    if spec.kind == "ratio":
        est = paired_bootstrap_ratio_diff(
            [r[0][0] for r in rows], [r[0][1] for r in rows],
            [r[1][0] for r in rows], [r[1][1] for r in rows], **kw,
        )
        test = None
    else:
        first, second = [r[0][0] for r in rows], [r[1][0] for r in rows]
        est = paired_bootstrap_mean_diff(first, second, **kw)
        test = mcnemar_from_outcomes(first, second) if rows and is_binary(first, second) else None
    return PairedDiff(run=run, n_paired=est.n, diff=est.value, ci_low=est.ci_low,
                      ci_high=est.ci_high, mcnemar=test)


def _is_rate(values: Sequence[MetricValue | None], default: bool = True) -> bool:
    known = [v.is_rate for v in values if v is not None]
    return all(known) if known else default


def _scenario_keys(runs: Sequence[LoadedRun]) -> list[ScenarioKey]:
    keys: list[ScenarioKey] = []
    for run in runs:
        found = [(s.benchmark, s.scenario) for s in run.metrics.scenarios]
        found += sorted({(c.benchmark, c.scenario) for c in run.cases})
        for k in found:
            if k not in keys:
                keys.append(k)
    # Benchmarks A-Z (as the run report), scenarios in first-seen (declared) order.
    order = {k: i for i, k in enumerate(keys)}
    return sorted(keys, key=lambda k: (k[0], order[k]))


def _groups(runs: Sequence[LoadedRun], cases: Sequence[dict[str, _Case]], key: ScenarioKey,
            label: str) -> list[str]:
    found: set[str] = set()
    for run in runs:
        s = run.metrics.scenario(*key)
        if s is not None:
            found |= {g.group for g in s.breakdown.get(label, [])}
    for by_id in cases:
        found |= {c.labels[label] for c in by_id.values() if label in c.labels}
    return sorted(found, key=natural_key)


def _uncompared(runs: Sequence[LoadedRun],
                collapsed: Sequence[dict[ScenarioKey, dict[str, _Case]]]) -> list[UncomparedBenchmark]:
    """The benchmarks that the reference lacks, or that only the reference has: a difference is
    always against the reference, so none of them has one."""
    keys = [{k[0] for k in _scenario_keys([run])} for run in runs]
    out = []
    for benchmark in sorted(set().union(*keys)):
        holders = [i for i, held in enumerate(keys) if benchmark in held]
        if holders[0] != 0 or len(holders) == 1:
            out.append(UncomparedBenchmark(benchmark=benchmark, n_cases=[
                sum(len(cases) for k, cases in by_key.items() if k[0] == benchmark)
                for by_key in collapsed]))
    return out


def compare_runs(
    runs: Sequence[LoadedRun],
    specs: dict[str, tuple[MetricSpec, ...]],
    breakdown_labels: dict[str, tuple[str, ...]],
    *,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Comparison:
    """Compare every run with ``runs[0]``: per scenario, metric and subgroup, each run's reported
    value and CI, and the paired difference (run - runs[0]) with a paired bootstrap interval.

    ``specs`` / ``breakdown_labels`` are keyed by benchmark (as in ``aggregate``). A benchmark
    without specs still gets its per-run values (from the reports) but no paired statistics.
    """
    if len(runs) < 2:
        raise ValueError(f"need at least two runs to compare, got {len(runs)}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    collapsed = [_collapse(r.cases) for r in runs]
    moved = [case_changes(runs[0].cases, r.cases, i) for i, r in enumerate(runs) if i > 0]
    kw = {"n_boot": n_boot, "seed": seed, "confidence": confidence}
    unknown: list[str] = []
    scenarios: list[ScenarioComparison] = []
    not_compared = _uncompared(runs, collapsed)
    skipped = {u.benchmark for u in not_compared}
    for key in _scenario_keys(runs):
        benchmark, scenario = key
        if benchmark in skipped:
            continue
        per_run = [c.get(key, {}) for c in collapsed]
        ref = per_run[0]
        coverage = []
        for i in range(1, len(runs)):
            both = ref.keys() & per_run[i].keys()
            coverage.append(PairCoverage(
                run=i,
                n_paired=len(both),
                only_in_reference=len(ref.keys() - per_run[i].keys()),
                only_in_run=len(per_run[i].keys() - ref.keys()),
                error_in_either=sum(ref[c].values is None or per_run[i][c].values is None
                                    for c in both),
            ))
        declared = [s for s in specs.get(benchmark, ()) if s.applies_to(scenario)]
        if benchmark not in specs and benchmark not in unknown:
            unknown.append(benchmark)
        names: list[str] = [s.name for s in declared]
        if not declared:  # unknown benchmark: the metrics the reports hold, unpaired
            for run in runs:
                s = run.metrics.scenario(*key)
                names += [n for n in (s.metrics if s else {}) if n not in names]
        by_name = {s.name: s for s in declared}

        def row(metric: str, label: str | None, group: str | None) -> MetricComparison:
            reported = [_reported(r.metrics, key, metric, label, group) for r in runs]
            spec = by_name.get(metric)
            diffs: list[PairedDiff] = []
            for i in range(1, len(runs)):
                ids = sorted(ref.keys() & per_run[i].keys())
                if label is not None:
                    ids = [c for c in ids if ref[c].labels.get(label) == group]
                if spec is None:
                    diffs.append(PairedDiff(run=i, n_paired=0, diff=None, ci_low=None, ci_high=None))
                else:
                    diffs.append(_paired(spec, ref, per_run[i], ids, i, **kw))
            hib = spec.higher_is_better if spec else next(
                (v.higher_is_better for v in reported if v is not None), True)
            return MetricComparison(
                benchmark=benchmark, scenario=scenario, metric=metric, label=label, group=group,
                higher_is_better=hib, is_rate=_is_rate(reported),
                values=[_run_value(v) for v in reported], diffs=diffs,
            )

        rows = [row(name, None, None) for name in names]
        for label in breakdown_labels.get(benchmark, ()):
            for group in _groups(runs, per_run, key, label):
                rows += [row(name, label, group) for name in names]
        changes = [m.get(key, CaseChanges(run=i + 1)) for i, m in enumerate(moved)]
        scenarios.append(ScenarioComparison(benchmark=benchmark, scenario=scenario,
                                            coverage=coverage, metrics=rows, changes=changes))
    from pytest_toolbench.compare.same_data import data_of
    from pytest_toolbench.results.provenance import short_line

    refs = [RunRef(label=r.label, model=r.model, path=r.path, run_id=r.run_id,
                   n_cases=len(r.cases), partial=r.partial, data=short_line(data_of(r)),
                   partial_reason=r.record.run.partial_reason() if r.partial else None,
                   usage=r.record.run.usage,
                   model_calls=r.record.run.cache.model_calls if r.record.run.cache else None,
                   cached_calls=r.record.run.cache.replies_from_cache if r.record.run.cache else None)
            for r in runs]
    return Comparison(runs=refs, confidence=confidence, n_boot=n_boot, seed=seed,
                      scenarios=scenarios, unknown_benchmarks=unknown, not_compared=not_compared)


def registry_specs() -> tuple[dict[str, tuple[MetricSpec, ...]], dict[str, tuple[str, ...]]]:
    """Metric declarations and breakdown labels of every registered benchmark."""
    from pytest_toolbench.benchmarks import registry

    reg = registry()
    return {n: b.metrics for n, b in reg.items()}, {n: b.breakdown_labels for n, b in reg.items()}


def compare_with_registry(runs: Sequence[LoadedRun], **kw: float | int) -> Comparison:
    specs, labels = registry_specs()
    return compare_runs(runs, specs, labels, **kw)  # type: ignore[arg-type]
