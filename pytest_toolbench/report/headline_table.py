"""A benchmark's headline grids (results/headline.py) as text tables for the end screen.

A cell is the value x100 with two decimals (a rate) as the papers print them, ``-`` where the
run has nothing to put there (the scenario does not declare the metric, or none of its cases
gives it: a level or split left out by ``-m``), ``n/a`` where cases ran but there is nothing to
measure, ``nan`` as the benchmark's own scoring gives it. The last column is ``cases``: the
scenario's scored cases, with its infrastructure errors as ``(k err)``.
"""

from __future__ import annotations

from pytest_toolbench.text_table import TextTable
from pytest_toolbench.results.aggregate import MetricValue, RunMetrics, ScenarioMetrics
from pytest_toolbench.results.headline import HeadlineColumn, HeadlineGrid

NOT_IN_RUN = "-"


def grid_value(x: float | None, *, is_rate: bool) -> str:
    if x is None:
        return "n/a"
    if x != x:  # nan, as upstream prints it
        return "nan"
    return f"{100 * x:.2f}" if is_rate else f"{x:.4g}"


def column_value(s: ScenarioMetrics, column: HeadlineColumn) -> MetricValue | None:
    """The metric a column shows for scenario ``s`` (None: not in this run)."""
    if column.label is None:
        mv = s.metrics.get(column.metric)
    else:
        group = next((g for g in s.breakdown.get(column.label, []) if g.group == column.group), None)
        mv = None if group is None else group.metrics.get(column.metric)
    if mv is None or (mv.n == 0 and mv.value is None):
        return None
    return mv


def _cell(mv: MetricValue | None) -> str:
    return NOT_IN_RUN if mv is None else grid_value(mv.value, is_rate=mv.is_rate)


def _ci(mv: MetricValue | None) -> str:
    if mv is None or mv.ci_low is None or mv.ci_high is None:
        return NOT_IN_RUN if mv is None else "n/a"
    scale = 100 if mv.is_rate else 1
    return f"[{scale * mv.ci_low:.2f}, {scale * mv.ci_high:.2f}]"


def _cases(scored: int, errors: int) -> str:
    return f"{scored} ({errors} err)" if errors else str(scored)


def grid_rows(metrics: RunMetrics, benchmark: str, grid: HeadlineGrid) -> list[tuple[str, ScenarioMetrics]]:
    """(title, scenario metrics) of each grid row that ran, in the grid's order."""
    out = []
    for scenario, title in grid.rows:
        s = metrics.scenario(benchmark, scenario)
        if s is not None:
            out.append((title, s))
    return out


def grid_table(metrics: RunMetrics, benchmark: str, grid: HeadlineGrid, *,
               confidence: float = 0.95) -> TextTable | None:
    """The grid as a table (None: none of its scenarios ran)."""
    rows = grid_rows(metrics, benchmark, grid)
    if not rows:
        return None
    ci_label = f"{round(100 * confidence)}% CI"
    header = [grid.corner]
    for column in grid.columns:
        header.append(column.title)
        if column.title in grid.ci:
            header.append(f"{column.title} {ci_label}")
    header.append("cases")
    cells: list[list[str]] = []
    for title, s in rows:
        line = [title]
        for column in grid.columns:
            mv = column_value(s, column)
            line.append(_cell(mv))
            if column.title in grid.ci:
                line.append(_ci(mv))
        line.append(_cases(s.n_cases - s.n_errors, s.n_errors))
        cells.append(line)
    if grid.total is not None:
        cells.append(_total_row(metrics, benchmark, grid, rows))
    return TextTable(header, cells, align=["l"] + ["r"] * (len(header) - 1), wrap={0},
                     narrow_headers=True)


def _total_row(metrics: RunMetrics, benchmark: str, grid: HeadlineGrid,
               rows: list[tuple[str, ScenarioMetrics]]) -> list[str]:
    total = grid.total
    assert total is not None
    table = next((t for t in metrics.tables if t.benchmark == benchmark and t.name == total.table),
                 None)
    line = [total.title]
    for column in grid.columns:
        key = total.cells.get(column.title)
        if key is None or table is None or key not in table.values:
            line.append("")
        else:
            line.append(grid_value(table.values[key], is_rate=True))
        if column.title in grid.ci:
            line.append("")
    line.append(_cases(sum(s.n_cases - s.n_errors for _, s in rows),
                       sum(s.n_errors for _, s in rows)))
    return line
