"""Turn per-case results into per-scenario metrics with bootstrap CIs and subgroup breakdowns.

Infrastructure errors (outcome ERROR) are counted apart and never enter a metric, so a flaky
endpoint cannot masquerade as a wrong answer. Results are sorted by case id before anything is
computed: the metrics of ``pytest -n 4`` and ``-n 0`` must be bit-identical although the results
reach the controller in a different order.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import Field

from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.results.bootstrap import Estimate, bootstrap_mean, bootstrap_ratio
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.metrics import MetricSpec
from pytest_toolbench.results.infra_errors import ErrorSummary, summarize_errors

#: The part of a metric path after the metric name.
MetricField = Literal["value", "ci_low", "ci_high", "n"]
_FIELDS: tuple[str, ...] = ("value", "ci_low", "ci_high", "n")
#: Scenario-level quantities that are not declared metrics.
ERROR_RATE = "error_rate"

_NAME = r"[A-Za-z0-9_\-]+"
_PATH_RE = re.compile(
    rf"^(?P<benchmark>{_NAME})\.(?P<scenario>{_NAME})"
    rf"(?:\[(?P<label>{_NAME})=(?P<group>[^\[\]=]+)\])?"
    rf"\.(?P<metric>{_NAME})(?:\.(?P<field>ci_low|ci_high|n|value))?$"
)
PATH_GRAMMAR = (
    "<benchmark>.<scenario>[<label>=<group>].<metric>[.ci_low|.ci_high|.n] "
    "(the [label=group] part is optional; <metric> may also be 'error_rate')"
)


class MetricValue(DeferredModel):
    name: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    higher_is_better: bool = True
    #: Whether the value is a proportion (shown as %). From ``MetricSpec.unit`` when the spec has
    #: one, else inferred: every per-case value in [0, 1] (mean) or 0 <= num <= den (ratio).
    is_rate: bool = True


class GroupMetrics(DeferredModel):
    label: str
    group: str
    #: All cases in the group, infrastructure errors included (as ScenarioMetrics.n_cases).
    n_cases: int
    metrics: dict[str, MetricValue]
    n_errors: int = 0


class ScenarioMetrics(DeferredModel):
    benchmark: str
    scenario: str
    n_cases: int  # all cases, errors included
    n_errors: int
    error_kinds: dict[str, int]
    #: Tool-call parse failures over all cases (events, not cases).
    n_parse_failures: int
    metrics: dict[str, MetricValue]
    #: label -> groups in natural order (hops 3, 4, 5, ..., 10).
    breakdown: dict[str, list[GroupMetrics]] = Field(default_factory=dict)
    n_cases_with_parse_failures: int = 0
    #: Cases with a reply the endpoint cut short (finish_reason ``length`` or ``content_filter``,
    #: ``details.cut_replies``): reported, scored as the benchmark scores the reply it got.
    n_cases_cut_short: int = 0
    #: kind -> cause, attempts and the option that would help (results/infra_errors.py).
    error_details: dict[str, ErrorSummary] = Field(default_factory=dict)

    @property
    def error_rate(self) -> float:
        return self.n_errors / self.n_cases if self.n_cases else 0.0


class MetricPath(DeferredModel):
    """A parsed ``toolhop.mandatory[hops=3].accuracy.ci_low`` address."""

    benchmark: str
    scenario: str
    metric: str
    field: MetricField = "value"
    label: str | None = None
    group: str | None = None

    @classmethod
    def parse(cls, path: str) -> MetricPath:
        m = _PATH_RE.match(path.strip())
        if m is None:
            raise ValueError(f"malformed metric path {path!r}; expected {PATH_GRAMMAR}")
        d = m.groupdict()
        if d["metric"] == ERROR_RATE and d["field"] not in (None, "value"):
            raise ValueError(f"{path!r}: error_rate has no .{d['field']} (it is an exact count ratio)")
        return cls(
            benchmark=d["benchmark"],
            scenario=d["scenario"],
            metric=d["metric"],
            field=d["field"] or "value",
            label=d["label"],
            group=d["group"].strip() if d["group"] else None,
        )

    def __str__(self) -> str:
        sub = f"[{self.label}={self.group}]" if self.label is not None else ""
        suffix = "" if self.field == "value" else f".{self.field}"
        return f"{self.benchmark}.{self.scenario}{sub}.{self.metric}{suffix}"


class ReportTable(DeferredModel):
    """A benchmark's own summary table (e.g. a paper's results table or a leaderboard), shown
    after the generic per-scenario tables and kept in the JSON report under ``metrics.tables``.

    Cells are plain values: numbers are shown as given (benchmarks round or scale them as their
    paper does), ``None`` as "n/a". ``values`` carries the same figures keyed by name for
    machine readers (and for gates on benchmark-level aggregates in later work)."""

    benchmark: str
    name: str  # stable key, e.g. "leaderboard"
    title: str
    columns: list[str]
    rows: list[list[str | float | int | None]]
    note: str = ""
    values: dict[str, float | None] = Field(default_factory=dict)


class RunMetrics(DeferredModel):
    scenarios: list[ScenarioMetrics]
    #: Benchmark-specific tables from ``Benchmark.report_tables`` (optional hook).
    tables: list[ReportTable] = Field(default_factory=list)

    def scenario(self, benchmark: str, scenario: str) -> ScenarioMetrics | None:
        for s in self.scenarios:
            if s.benchmark == benchmark and s.scenario == scenario:
                return s
        return None

    def resolve(self, path: str | MetricPath) -> tuple[bool, float | None]:
        """``(found, value)``: found is False when the path names nothing in this run."""
        p = path if isinstance(path, MetricPath) else MetricPath.parse(path)
        s = self.scenario(p.benchmark, p.scenario)
        if s is None:
            return False, None
        if p.label is None:
            if p.metric == ERROR_RATE:
                return True, s.error_rate
            metrics = s.metrics
        else:
            group = next(
                (g for g in s.breakdown.get(p.label, []) if g.group == p.group), None
            )
            if group is None:
                return False, None
            if p.metric == ERROR_RATE:
                return True, (group.n_errors / group.n_cases if group.n_cases else 0.0)
            metrics = group.metrics
        mv = metrics.get(p.metric)
        if mv is None:
            return False, None
        raw = getattr(mv, p.field)
        return True, None if raw is None else float(raw)

    def lookup(self, path: str) -> float | None:
        """The number at ``path`` (None if absent or undefined). Raises ValueError if malformed."""
        return self.resolve(path)[1]

    def available_paths(self) -> list[str]:
        """Every metric path in this run (without the .ci_low/.ci_high/.n variants)."""
        out: list[str] = []
        for s in self.scenarios:
            base = f"{s.benchmark}.{s.scenario}"
            out.extend(f"{base}.{name}" for name in s.metrics)
            out.append(f"{base}.{ERROR_RATE}")
            for label, groups in s.breakdown.items():
                for g in groups:
                    out.extend(f"{base}[{label}={g.group}].{name}" for name in g.metrics)
        return out

    def suggest(self, path: str, *, limit: int = 8) -> str:
        """A short 'did you mean / available' hint for an unknown path."""
        paths = self.available_paths()
        if not paths:
            return "no metrics were computed in this run (no results?)"
        # Compare like with like: a subgroup path against subgroup paths, else top-level ones.
        pool = [p for p in paths if ("[" in p) == ("[" in path)] or paths
        close = difflib.get_close_matches(path, pool, n=2, cutoff=0.6)
        head = [p for p in paths if "[" not in p][:limit]
        more = len(paths) - len(head)
        hint = "available: " + ", ".join(head)
        if more > 0:
            hint += f", ... ({more} more incl. [label=group] subgroups)"
        if close:
            hint = f"did you mean {' or '.join(close)}? " + hint
        return hint


def natural_key(group: str) -> tuple[int, float, str]:
    """Sort "3" < "10" numerically, numbers before words."""
    try:
        return (0, float(group), group)
    except ValueError:
        return (1, 0.0, group)


def _infer_is_rate(spec: MetricSpec, cases: Sequence[CaseResult]) -> bool:
    unit = getattr(spec, "unit", None)  # honoured if MetricSpec ever grows a unit
    if unit is not None:
        return unit in ("rate", "proportion", "percent", "%")
    for r in cases:
        v = r.values[spec.value]
        if v != v:  # nan says nothing about the unit
            continue
        if spec.kind == "ratio":
            d = r.values[spec.denominator or ""]
            if not 0.0 <= v <= d:
                return False
        elif not 0.0 <= v <= 1.0:
            return False
    return True


def _metric(
    spec: MetricSpec, cases: Sequence[CaseResult], *, n_boot: int, seed: int, confidence: float
) -> MetricValue:
    if spec.kind == "ratio":
        if not spec.denominator:
            raise ValueError(f"ratio metric {spec.name!r} has no denominator")
        have = [r for r in cases if spec.value in r.values and spec.denominator in r.values]
        est: Estimate = bootstrap_ratio(
            [r.values[spec.value] for r in have],
            [r.values[spec.denominator] for r in have],
            n_boot=n_boot,
            seed=seed,
            confidence=confidence,
        )
    else:
        have = [r for r in cases if spec.value in r.values]
        est = bootstrap_mean(
            [r.values[spec.value] for r in have], n_boot=n_boot, seed=seed, confidence=confidence
        )
    return MetricValue(
        name=spec.name,
        value=est.value,
        ci_low=est.ci_low,
        ci_high=est.ci_high,
        n=est.n,
        higher_is_better=spec.higher_is_better,
        is_rate=_infer_is_rate(spec, have),
    )


def _metrics(
    specs: Sequence[MetricSpec],
    scored: Sequence[CaseResult],
    *,
    n_boot: int,
    seed: int,
    confidence: float,
) -> dict[str, MetricValue]:
    return {
        spec.name: _metric(spec, scored, n_boot=n_boot, seed=seed, confidence=confidence)
        for spec in specs
    }


def _sorted(results: Iterable[CaseResult]) -> list[CaseResult]:
    rs = list(results)
    ids = [r.case_id for r in rs]
    if len(set(ids)) == len(ids):
        return sorted(rs, key=lambda r: r.case_id)
    # Duplicate ids (e.g. repeats): break ties on content so the order is still total.
    return sorted(rs, key=lambda r: (r.case_id, r.model_dump_json()))


def aggregate(
    results: Iterable[CaseResult],
    metric_specs: dict[str, tuple[MetricSpec, ...]],
    breakdown_labels: dict[str, tuple[str, ...]],
    *,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    scenario_order: dict[str, tuple[str, ...]] | None = None,
) -> RunMetrics:
    """Metrics per (benchmark, scenario), each with a percentile-bootstrap CI over cases.

    ``metric_specs``, ``breakdown_labels`` and ``scenario_order`` are keyed by benchmark name;
    ``scenario_order`` lists scenarios in the benchmark's own order (the report follows it). The
    caller passes each case once (deduplicate the xdist channels first); duplicates are repeats.
    """
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    by_scenario: dict[tuple[str, str], list[CaseResult]] = defaultdict(list)
    for r in _sorted(results):
        by_scenario[(r.benchmark, r.scenario)].append(r)

    kw = {"n_boot": n_boot, "seed": seed, "confidence": confidence}
    out: list[ScenarioMetrics] = []
    order = scenario_order or {}

    def position(key: tuple[str, str]) -> tuple[str, int, str]:
        """Benchmarks A-Z; scenarios in the benchmark's declared order, unknown ones last, A-Z."""
        benchmark, scenario = key
        declared = order.get(benchmark, ())
        rank = declared.index(scenario) if scenario in declared else len(declared)
        return benchmark, rank, scenario

    for (benchmark, scenario), cases in sorted(by_scenario.items(), key=lambda kv: position(kv[0])):
        specs = [s for s in metric_specs.get(benchmark, ()) if s.applies_to(scenario)]
        scored = [r for r in cases if not r.is_error]
        errors = [r for r in cases if r.is_error]
        kinds = Counter(r.error.kind if r.error else "unknown" for r in errors)

        breakdown: dict[str, list[GroupMetrics]] = {}
        for label in breakdown_labels.get(benchmark, ()):
            members: dict[str, list[CaseResult]] = defaultdict(list)
            for r in cases:
                if label in r.labels:
                    members[str(r.labels[label])].append(r)
            breakdown[label] = [
                GroupMetrics(
                    label=label,
                    group=group,
                    n_cases=len(members[group]),
                    n_errors=sum(r.is_error for r in members[group]),
                    metrics=_metrics(
                        specs, [r for r in members[group] if not r.is_error], **kw
                    ),
                )
                for group in sorted(members, key=natural_key)
            ]

        out.append(
            ScenarioMetrics(
                benchmark=benchmark,
                scenario=scenario,
                n_cases=len(cases),
                n_errors=len(errors),
                error_kinds=dict(sorted(kinds.items())),
                error_details=summarize_errors(errors),
                n_parse_failures=sum(len(r.parse_failures) for r in cases),
                n_cases_with_parse_failures=sum(bool(r.parse_failures) for r in cases),
                n_cases_cut_short=sum(bool(r.details.get("cut_replies")) for r in cases),
                metrics=_metrics(specs, scored, **kw),
                breakdown=breakdown,
            )
        )
    return RunMetrics(scenarios=out)
