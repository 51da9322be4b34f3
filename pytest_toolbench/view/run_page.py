"""A run's page model: every metric with its CI and n, every breakdown as a table and a plot,
the gates, the settings, endpoint retries and infrastructure errors with their causes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.results.aggregate import GroupMetrics, ScenarioMetrics
from pytest_toolbench.results.infra_errors import ErrorSummary, attempts_text
from pytest_toolbench.view.cells import Cell, exit_text, metric_cell, table_value, when
from pytest_toolbench.view.load import ViewRun


class MetricRow(DeferredModel):
    name: str
    meaning: str
    cell: Cell
    higher_is_better: bool


class Breakdown(DeferredModel):
    label: str
    metrics: list[str]
    #: (group, cases, errors, one cell per metric).
    rows: list[tuple[str, int, int, list[Cell]]]
    #: Chart data for the client (static/app.js ``TB.plot``): groups, and per metric the values
    #: and CI bounds, scaled x100 for rates.
    plot: dict[str, Any]


class ErrorLine(DeferredModel):
    kind: str
    count: int
    text: str


class ScenarioSection(DeferredModel):
    benchmark: str
    scenario: str
    n_cases: int
    n_errors: int
    n_parse_failures: int
    n_cut_short: int
    metrics: list[MetricRow]
    errors: list[ErrorLine]
    breakdowns: list[Breakdown]


class TableView(DeferredModel):
    benchmark: str
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str


class RunPage(DeferredModel):
    key: str
    model: str
    run_id: str
    title: str
    facts: list[tuple[str, str]]
    data: list[str]
    scenarios: list[ScenarioSection]
    tables: list[TableView]
    gates: list[tuple[bool, str, str, str]]
    settings: list[tuple[str, str]]
    endpoints: str
    n_cases: int
    outcomes: dict[str, int]


def _plot(label: str, groups: list[GroupMetrics], metrics: list[str]) -> dict[str, Any]:
    series = []
    for m in metrics:
        vals, lows, highs = [], [], []
        rate = True
        for g in groups:
            mv = g.metrics.get(m)
            scale = 100.0 if (mv is None or mv.is_rate) else 1.0
            rate = rate and (mv is None or mv.is_rate)
            ok = mv is not None and mv.value is not None and mv.value == mv.value
            vals.append(mv.value * scale if ok else None)
            lows.append(mv.ci_low * scale if ok and mv.ci_low is not None else None)
            highs.append(mv.ci_high * scale if ok and mv.ci_high is not None else None)
        series.append({"metric": m, "values": vals, "low": lows, "high": highs, "rate": rate})
    return {"label": label, "groups": [g.group for g in groups], "series": series}


def error_text(e: ErrorSummary) -> str:
    """The cause (an unreachable endpoint's verdict first), the attempts per call and the option
    that would help, on one line: the kind and count have their own columns, so this is not
    results/infra_errors.py ``ErrorSummary.text``, which leads with them."""
    parts = [e.unreachable or e.cause or e.kind]
    if e.attempts_max is not None:
        parts.append(attempts_text(e.attempts_min, e.attempts_max))
    if e.hint:
        parts.append(f"try: {e.hint}")
    return "; ".join(parts)


def _section(s: ScenarioMetrics, meanings: Mapping[str, str]) -> ScenarioSection:
    rows = [MetricRow(name=name, meaning=meanings.get(name, ""), cell=metric_cell(mv),
                      higher_is_better=mv.higher_is_better) for name, mv in s.metrics.items()]
    errors = [ErrorLine(kind=k, count=e.count, text=error_text(e)) for k, e in s.error_details.items()]
    known = set(s.error_details)
    errors += [ErrorLine(kind=k, count=n, text=f"{k} x{n}") for k, n in s.error_kinds.items()
               if k not in known]
    breakdowns = []
    for label, groups in s.breakdown.items():
        names = [m for m in s.metrics if any(m in g.metrics for g in groups)]
        table = [(g.group, g.n_cases, g.n_errors, [metric_cell(g.metrics.get(m)) for m in names])
                 for g in groups]
        breakdowns.append(Breakdown(label=label, metrics=names, rows=table,
                                    plot=_plot(label, groups, names)))
    return ScenarioSection(benchmark=s.benchmark, scenario=s.scenario, n_cases=s.n_cases,
                           n_errors=s.n_errors, n_parse_failures=s.n_parse_failures,
                           n_cut_short=s.n_cases_cut_short, metrics=rows, errors=errors,
                           breakdowns=breakdowns)


def _flat(prefix: str, value: Any, out: list[tuple[str, str]]) -> None:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flat(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out.append((prefix, json.dumps(value, ensure_ascii=False)))


def build_run_page(run: ViewRun, meanings: Mapping[str, Mapping[str, str]]) -> RunPage:
    """``meanings``: benchmark -> metric -> its one-line description (MetricSpec.description)."""
    record = run.record
    info = record.run
    status = "partial" if record.partial else "complete"
    if info.interrupted_by:
        status += f" (interrupted by {info.interrupted_by})"
    elif info.pytest_stop:
        status += f" ({info.pytest_stop})"
    facts = [("model", run.model or "?"), ("backend", info.settings.backend or "?"),
             ("run id", run.run_id), ("started", when(info.started)),
             ("finished", when(info.finished)),
             ("wall time", f"{info.wall_s:.1f} s" if info.wall_s is not None else "?"),
             ("status", status), ("exit status", exit_text(info.exit_status)),
             ("toolbench", info.toolbench_version or "?"), ("report", run.path)]
    if record.missing_cases:
        facts.append(("missing cases", f"{len(record.missing_cases)}: "
                      + ", ".join(record.missing_cases[:10])))
    for o in info.output_errors:
        facts.append(("output error", o))
    data = [d.text() for d in run.data()]
    for name, cov in info.coverage.items():
        if cov.subset:
            data.append(f"{name} SUBSET: {cov.cases} of {cov.suite_cases or '?'} cases (not "
                        "comparable with a full run)")
    scenarios = [_section(s, meanings.get(s.benchmark, {})) for s in record.metrics.scenarios]
    tables = [TableView(benchmark=t.benchmark, title=t.title, columns=list(t.columns),
                        rows=[[table_value(v) for v in r] for r in t.rows], note=t.note)
              for t in record.metrics.tables]
    gates = [(g.passed, g.kind, g.gate, g.reason) for g in record.gates]
    settings: list[tuple[str, str]] = []
    _flat("", info.settings.as_json(), settings)
    endpoints = (json.dumps({url: c.as_json() for url, c in info.endpoints.items()}, indent=2,
                            ensure_ascii=False) if info.endpoints else "")
    outcomes: dict[str, int] = {}
    for c in record.cases:
        outcomes[c.outcome.value] = outcomes.get(c.outcome.value, 0) + 1
    return RunPage(key=run.key, model=run.model or "?", run_id=run.run_id,
                   title=f"{run.model or '?'} - {run.run_id}", facts=facts, data=data,
                   scenarios=scenarios, tables=tables, gates=gates, settings=settings,
                   endpoints=endpoints, n_cases=len(record.cases), outcomes=outcomes)
