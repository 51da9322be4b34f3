"""How a number reads in the site: a value with its CI and n, as the terminal shows it (rates in
%, other values to 4 significant digits, ``n/a`` for nothing measured, ``nan`` kept)."""

from __future__ import annotations

import math
import time


from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.results.aggregate import MetricValue


class Cell(DeferredModel):
    """One metric value in a table: the text shown and the number a sort uses."""

    text: str
    ci: str = ""
    n: int | None = None
    #: The sort key (None: sorts last); the raw value, not the rounded text.
    sort: float | None = None


def number(value: float | None, is_rate: bool) -> str:
    if value is None:
        return "n/a"
    if math.isnan(value):
        return "nan"
    return f"{100 * value:.1f}%" if is_rate else f"{value:.4g}"


def interval(low: float | None, high: float | None, is_rate: bool) -> str:
    if low is None or high is None:
        return ""
    if is_rate:
        return f"[{100 * low:.1f}, {100 * high:.1f}]"
    return f"[{low:.4g}, {high:.4g}]"


def metric_cell(mv: MetricValue | None) -> Cell:
    if mv is None:
        return Cell(text="-")
    sort = None if mv.value is None or math.isnan(mv.value) else mv.value
    return Cell(text=number(mv.value, mv.is_rate), ci=interval(mv.ci_low, mv.ci_high, mv.is_rate),
                n=mv.n, sort=sort)


def when(ts: float | None) -> str:
    """UTC, so a site built on a CI machine reads the same everywhere."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts)) if ts else "?"


def exit_text(status: int | None) -> str:
    """``0 OK``, ``10 GATE_FAILED`` (as ``toolbench runs``); ``?`` when the run did not record it."""
    if status is None:
        return "?"
    try:
        return f"{status} {ToolbenchExit(status).name}"
    except ValueError:
        return str(status)


def table_value(v: object) -> str:
    """A report-table cell: numbers as the benchmark gave them (already scaled), None as n/a."""
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.2f}"
    return str(v)
