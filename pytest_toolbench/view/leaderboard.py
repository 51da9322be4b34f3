"""The leaderboard's page model: one table per data group (groups.py), one row per run, one
column per (benchmark, scenario) with the scenario's lead metric and its 95% CI, and each paper's
own tables with every run's rows stacked, as the papers list one row per model.

The lead metric is the one the benchmark's headline puts first for that scenario
(results/headline.py's ``lead_metric``, which ``toolbench runs`` uses too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.report.progress import short_count
from pytest_toolbench.results.gates import GateVerdict
from pytest_toolbench.results.headline import Headline, headline_of, lead_metric
from pytest_toolbench.results.provenance import short_line
from pytest_toolbench.results.repeats import base_case_id
from pytest_toolbench.results.run_record import RunRecord
from pytest_toolbench.view.cells import Cell, exit_text, metric_cell, table_value, when
from pytest_toolbench.view.groups import DataGroup
from pytest_toolbench.view.load import ViewRun


class Column(DeferredModel):
    benchmark: str
    scenario: str
    metric: str


class Row(DeferredModel):
    key: str
    model: str
    backend: str
    run_id: str
    data: str
    when: str
    started: float
    cases: int
    errors: int
    #: Prompt + completion tokens of the scored replies, short ("1.23M"); "-" where the record
    #: has none (the oracle, a replay, a report from before they were kept).
    tokens: str
    tokens_total: int | None
    tokens_title: str
    gates: str
    gates_failed: bool
    status: str
    exit: str
    cells: list[Cell]


class PaperTable(DeferredModel):
    benchmark: str
    title: str
    columns: list[str]
    #: (run key, model, cells) per row.
    rows: list[tuple[str, str, list[str]]]
    notes: list[str]


class GroupBoard(DeferredModel):
    group: DataGroup
    columns: list[Column]
    rows: list[Row]
    tables: list[PaperTable]


class Leaderboard(DeferredModel):
    boards: list[GroupBoard]
    skipped: list[str]


def _columns(runs: Sequence[ViewRun], headlines: Mapping[str, Headline]) -> list[Column]:
    cols: list[Column] = []
    seen: set[tuple[str, str, str]] = set()
    for run in runs:
        for s in run.record.metrics.scenarios:
            m = lead_metric(headlines.get(s.benchmark, Headline()), s.scenario, s.metrics)
            if m is not None and (s.benchmark, s.scenario, m) not in seen:
                seen.add((s.benchmark, s.scenario, m))
                cols.append(Column(benchmark=s.benchmark, scenario=s.scenario, metric=m))
    order = {c.benchmark: i for i, c in reversed(list(enumerate(cols)))}
    return sorted(cols, key=lambda c: (c.benchmark, order[c.benchmark]))  # benchmarks A-Z


def gates_text(gates: Sequence[GateVerdict]) -> str:
    """``passed 3/3``, ``FAILED 1/4`` (as ``toolbench runs``), ``-`` for a run without gates."""
    failed = sum(not g.passed for g in gates)
    if not gates:
        return "-"
    return f"FAILED {failed}/{len(gates)}" if failed else f"passed {len(gates)}/{len(gates)}"


def status_text(record: RunRecord) -> str:
    if not record.partial:
        return "complete" if record.cases else "no case ran"
    by = record.run.interrupted_by or ("stopped early" if record.run.pytest_stop else None)
    return f"partial ({by})" if by else "partial"


def _row(run: ViewRun, columns: Sequence[Column]) -> Row:
    record = run.record
    cells = []
    for c in columns:
        s = record.metrics.scenario(c.benchmark, c.scenario)
        cells.append(metric_cell(s.metrics.get(c.metric) if s else None))
    return Row(key=run.key, model=run.model or "?",
               backend=str(record.run.settings.backend or "?"),
               run_id=run.run_id, data=short_line(run.data()),
               when=when(record.run.started), started=record.run.started or 0.0,
               cases=len({base_case_id(c) for c in record.cases}),
               errors=sum(s.n_errors for s in record.metrics.scenarios),
               **_tokens(record), gates=gates_text(record.gates),
               gates_failed=any(not g.passed for g in record.gates),
               status=status_text(record), exit=exit_text(record.run.exit_status), cells=cells)


def _tokens(record: RunRecord) -> dict[str, Any]:
    """The row's tokens cell: short total, its sort value, and the split in its title."""
    usage, title = record.run.usage, record.run.tokens_text()
    if usage is None or title is None:
        return {"tokens": "-", "tokens_total": None, "tokens_title": "no token counts recorded"}
    total = usage.prompt_tokens + usage.completion_tokens
    return {"tokens": short_count(total), "tokens_total": total, "tokens_title": title}


def _paper_tables(runs: Sequence[ViewRun]) -> list[PaperTable]:
    tables: dict[tuple[str, str], PaperTable] = {}
    for run in runs:
        for t in run.record.metrics.tables:
            pt = tables.setdefault((t.benchmark, t.name), PaperTable(
                benchmark=t.benchmark, title=t.title, columns=list(t.columns), rows=[], notes=[]))
            if t.note and t.note not in pt.notes:
                pt.notes.append(t.note)
            for r in t.rows:
                pt.rows.append((run.key, run.model, [table_value(v) for v in r]))
    return sorted(tables.values(), key=lambda t: t.benchmark)


def build_leaderboard(runs: Sequence[ViewRun], groups: Sequence[DataGroup],
                      benchmarks: Mapping[str, Any], skipped: Sequence[str] = ()) -> Leaderboard:
    """``benchmarks``: the registry (name -> Benchmark) for the headline declarations; a
    benchmark it lacks falls back to each scenario's first metric."""
    headlines = {name: headline_of(b) for name, b in benchmarks.items()}
    by_key = {r.key: r for r in runs}
    boards = []
    for g in groups:
        members = [by_key[k] for k in g.keys]
        columns = _columns(members, headlines)
        rows = [_row(r, columns) for r in members]
        rows.sort(key=lambda r: -r.started)  # newest first until the reader sorts
        boards.append(GroupBoard(group=g, columns=columns, rows=rows,
                                 tables=_paper_tables(members)))
    return Leaderboard(boards=boards, skipped=list(skipped))
