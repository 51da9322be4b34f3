"""A model-comparison bar chart: one group of bars per metric, one bar per run, CI error bars.

Rates are drawn on a 0-100 % axis, as every table prints them; metrics that are not rates (if a
benchmark has any) get a second panel with their own axis, so one axis never mixes two scales.
Metrics without a value in any run are left out. Title and labels are fitted so nothing is
clipped or overlaps (plot_layout.py). Drawn on matplotlib's Agg canvas, without pyplot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_toolbench.results.comparison import Comparison, MetricComparison


def _rows(comp: Comparison, subgroups: bool) -> list[MetricComparison]:
    return [m for s in comp.scenarios for m in s.metrics
            if (subgroups or m.label is None)
            and any(v is not None and v.value is not None and v.value == v.value for v in m.values)]


def _draw_panel(ax: Any, comp: Comparison, rows: list[MetricComparison], *, percent: bool) -> None:
    """Horizontal bars, one row per metric (its name readable on the left, first at the top),
    one bar per run inside the row."""
    import numpy as np

    scale = 100.0 if percent else 1.0
    n_runs = len(comp.runs)
    y = np.arange(len(rows))
    height = 0.8 / n_runs
    for i, run in enumerate(comp.runs):
        vals, lo, hi = [], [], []
        for m in rows:
            v = m.values[i]
            value = v.value * scale if v and v.value is not None else np.nan
            vals.append(value)
            lo.append(max(0.0, value - v.ci_low * scale) if v and v.ci_low is not None else 0.0)
            hi.append(max(0.0, v.ci_high * scale - value) if v and v.ci_high is not None else 0.0)
        ax.barh(y + (i - (n_runs - 1) / 2) * height, vals, height, xerr=[lo, hi], capsize=2,
                label=run.label, error_kw={"elinewidth": 0.8})
    ax.set_yticks(y)
    ax.set_yticklabels([_label(m) for m in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # first row at the top
    ax.grid(axis="x", alpha=0.3)
    if percent:
        from matplotlib.ticker import PercentFormatter

        ax.set_xlim(0, 100)
        ax.xaxis.set_major_formatter(PercentFormatter(100))
    ax.set_xlabel(f"{'rate' if percent else 'value'} (bars: {100 * comp.confidence:g}% CI)")


def _label(m: MetricComparison) -> str:
    worse = "" if m.higher_is_better else " (lower is better)"
    return f"{m.benchmark}/{m.scenario} {m.row_name}{worse}"


def draw_comparison(comp: Comparison, *, subgroups: bool = False) -> Any:
    """The chart as a matplotlib Figure (top-level metrics only unless ``subgroups``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from pytest_toolbench.plot_layout import settle

    rows = _rows(comp, subgroups)
    if not rows:
        raise ValueError("nothing to plot: no metric has a value in any run")
    panels = [(r, p) for r, p in (([m for m in rows if m.is_rate], True),
                                  ([m for m in rows if not m.is_rate], False)) if r]
    row_in = 0.16 * max(1.5, 0.8 * len(comp.runs) + 0.8)
    heights = [1.0 + row_in * len(r) for r, _ in panels]
    fig = Figure(figsize=(10.0, 0.8 + sum(heights)), dpi=110)
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(len(panels), 1, height_ratios=heights)
    runs = " vs ".join(r.label for r in comp.runs)
    for k, (panel_rows, percent) in enumerate(panels):
        ax = fig.add_subplot(grid[k])
        _draw_panel(ax, comp, panel_rows, percent=percent)
        if k == 0:
            legend = ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0.0, 1.0),
                               ncol=min(4, len(comp.runs)), frameon=False)
            fig.canvas.draw()  # the title sits above the legend, whatever its height
            legend_pt = legend.get_window_extent().height * 72 / fig.dpi
            differ = " (DIFFERENT DATA, --allow-different-data)" if comp.different_data else ""
            settle(fig, ax, f"model comparison: {runs}{differ}", fontsize=10, pad=legend_pt + 10)
    fig.tight_layout()
    return fig


def plot_comparison(comp: Comparison, path: str | Path, *, subgroups: bool = False) -> Path:
    """Write :func:`draw_comparison`'s chart as a PNG."""
    fig = draw_comparison(comp, subgroups=subgroups)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return out
