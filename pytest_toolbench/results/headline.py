"""What a benchmark's end screen shows by default: the numbers its paper leads with.

A benchmark declares ``headline`` (a :class:`Headline`) beside its ``metrics``; the terminal's
one screen shows that and nothing else of the benchmark (``-v`` adds every metric, the
breakdowns and the paper tables, as before). Two forms, which a benchmark may combine:

- ``metrics``: the generic overview, one row per (scenario, metric) with its value, confidence
  interval and n, for the metrics named here (ToolHop: ``("accuracy",)``);
- ``grids``: tables laid out as the paper's main table, one row per scenario (spelled out as the
  paper names it), one column per metric, or per metric over one breakdown group (FamilyTool's
  ``b EM``: ``em`` over the cases of ``split=b``), values x100 as papers print them, optionally
  a confidence-interval column for the lead number and a last row from a report table's values
  (ToolBeHonest's pooled Overall).

Only declarations: nothing here computes a metric. Every cell is a value the run already has
(a scenario's metric, a breakdown group's metric or a report table's ``values``), so the JSON
report, the gates and ``-v`` are unchanged. A benchmark without ``headline`` (an outside one
written before it existed) keeps the generic overview with each scenario's first declared
metric. A scenario that no grid lists is shown in the generic overview, so none disappears.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping


@dataclass(frozen=True)
class HeadlineColumn:
    """One column of a grid: ``metric`` of the row's scenario, or of one breakdown group of it
    (``label``/``group``, e.g. ``split``/``b``)."""

    title: str
    metric: str
    label: str | None = None
    group: str | None = None


@dataclass(frozen=True)
class HeadlineTotal:
    """A last row under a grid's scenarios: cells from the ``values`` of the benchmark's report
    table ``table`` (column title -> key there, the value unscaled, as report tables keep it)."""

    title: str
    table: str
    cells: Mapping[str, str]


@dataclass(frozen=True)
class HeadlineGrid:
    """A paper-layout table: ``rows`` are (scenario, title) in the paper's order; a scenario that
    did not run has no row and a grid with no row is not shown."""

    #: The first column's header, e.g. ``"toolbehonest (unsolvable)"``.
    corner: str
    rows: tuple[tuple[str, str], ...]
    columns: tuple[HeadlineColumn, ...]
    #: Titles of the columns whose confidence interval gets a column beside them.
    ci: tuple[str, ...] = ()
    total: HeadlineTotal | None = None
    #: Printed under the table (what the numbers are: scale, variant, the paper's table).
    note: str = ""

    @property
    def scenarios(self) -> tuple[str, ...]:
        return tuple(s for s, _ in self.rows)


@dataclass(frozen=True)
class Headline:
    #: Metrics shown in the generic overview (value, CI, n) for the scenarios no grid lists; empty:
    #: each scenario's first declared metric (the behaviour of a benchmark without a headline).
    metrics: tuple[str, ...] = ()
    grids: tuple[HeadlineGrid, ...] = field(default_factory=tuple)


#: What a benchmark that declares no headline gets.
DEFAULT_HEADLINE = Headline()


def headline_of(benchmark: Any) -> Headline:
    """The benchmark's declared headline, :data:`DEFAULT_HEADLINE` when it declares none."""
    declared = getattr(benchmark, "headline", None)
    if declared is None:
        return DEFAULT_HEADLINE
    if not isinstance(declared, Headline):
        raise TypeError(f"{getattr(benchmark, 'name', benchmark)!r}: headline must be a "
                        f"pytest_toolbench.results.headline.Headline, not {type(declared).__name__}")
    return declared


def headlines_of(benchmarks: Mapping[str, Any]) -> dict[str, Headline]:
    """name -> headline of each benchmark (the registry, or a run's own benchmarks)."""
    return {name: headline_of(b) for name, b in benchmarks.items()}


def lead_metric(headline: Headline, scenario: str, metrics: Iterable[str]) -> str | None:
    """The one metric of ``scenario`` (which has ``metrics``, in declared order) that stands for it
    where there is room for one (the leaderboard's column, ``toolbench runs``' headline): the
    first declared overview metric it has, else its grid's ``Overall`` column, else the grid's
    first metric it has, else its first metric. So an L3-only ToolBeHonest run leads with its
    Overall, as the terminal does, not with an ``l1_em`` it never computed."""
    has = list(metrics)
    for m in headline.metrics:
        if m in has:
            return m
    for grid in headline.grids:
        if scenario not in grid.scenarios:
            continue
        overall = [c.metric for c in grid.columns if c.title.lower() == "overall" and c.label is None]
        for m in overall + [c.metric for c in grid.columns]:
            if m in has:
                return m
    return has[0] if has else None
