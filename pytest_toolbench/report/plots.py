"""Plots of a run's metrics: each metric by each breakdown label, with its bootstrap CI as bars.

Generic over :class:`~pytest_toolbench.results.aggregate.RunMetrics`: one PNG per
(benchmark, scenario, breakdown label, metric), whatever the labels are (hops, domain, level,
category, ...), so no benchmark needs plotting code of its own. :func:`plot_specs` holds exactly
the numbers drawn (taken from the aggregate, rates in percent), so a test can check them.
Rendering uses matplotlib's Agg canvas without pyplot: no display, no global state, thread-safe.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pytest_toolbench.results.aggregate import RunMetrics


class PlotSpec(BaseModel):
    benchmark: str
    scenario: str
    label: str
    metric: str
    groups: list[str]
    #: Per group, in the aggregate's order; None where the metric is undefined (n = 0).
    values: list[float | None]
    ci_low: list[float | None]
    ci_high: list[float | None]
    n: list[int]
    is_rate: bool
    higher_is_better: bool

    @property
    def filename(self) -> str:
        safe = re.sub(r"[^A-Za-z0-9_.\-]+", "_",
                      f"{self.benchmark}.{self.scenario}.{self.metric}.by-{self.label}")
        return f"{safe}.png"


def plot_specs(metrics: RunMetrics) -> list[PlotSpec]:
    """One spec per scenario x breakdown label x metric, values scaled to % for rates."""
    specs: list[PlotSpec] = []
    for s in metrics.scenarios:
        for label, groups in s.breakdown.items():
            if not groups:
                continue
            for name in s.metrics:
                mvs = [g.metrics.get(name) for g in groups]
                first = next((m for m in mvs if m is not None), None)
                if first is None or not any(m is not None and _defined(m.value) for m in mvs):
                    continue  # every group n/a (or nan): an empty chart says nothing
                scale = 100.0 if first.is_rate else 1.0

                def scaled(x: float | None) -> float | None:
                    return None if x is None else x * scale

                specs.append(PlotSpec(
                    benchmark=s.benchmark, scenario=s.scenario, label=label, metric=name,
                    groups=[g.group for g in groups],
                    values=[scaled(m.value) if m else None for m in mvs],
                    ci_low=[scaled(m.ci_low) if m else None for m in mvs],
                    ci_high=[scaled(m.ci_high) if m else None for m in mvs],
                    n=[m.n if m else 0 for m in mvs],
                    is_rate=first.is_rate, higher_is_better=first.higher_is_better,
                ))
    return specs


def _defined(x: float | None) -> bool:
    return x is not None and x == x  # None: no value; nan: no bar either


def render(spec: PlotSpec, path: Path) -> Path:
    """Write :func:`draw`'s chart as a PNG."""
    fig = draw(spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


def draw(spec: PlotSpec) -> Any:
    """One spec as a bar chart (a matplotlib Figure) with CI error bars and n under each bar;
    rates on a 0-100 % axis (the tables print %). The title wraps and the x labels wrap or turn
    until nothing is clipped or overlaps (plot_layout.py)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import PercentFormatter

    from pytest_toolbench.plot_layout import fit_xticklabels, settle, wrap_label

    width = max(5.0, min(16.0, 1.5 + 0.6 * len(spec.groups)))
    fig = Figure(figsize=(width, 3.6), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    xs = list(range(len(spec.groups)))
    heights = [v if _defined(v) else 0.0 for v in spec.values]
    lower = [max(0.0, v - lo) if _defined(v) and _defined(lo) else 0.0  # type: ignore[operator]
             for v, lo in zip(spec.values, spec.ci_low)]
    upper = [max(0.0, hi - v) if _defined(v) and _defined(hi) else 0.0  # type: ignore[operator]
             for v, hi in zip(spec.values, spec.ci_high)]
    ax.bar(xs, heights, color="#4c72b0", yerr=[lower, upper], capsize=4, ecolor="#333333")
    for x, v, n in zip(xs, spec.values, spec.n):
        drawn = _defined(v)
        text = f"n={n}" if drawn else "n/a" if v is None else f"nan n={n}"
        ax.annotate(text, (x, 0), xytext=(0, 2), textcoords="offset points", ha="center",
                    fontsize=7, color="white" if drawn and v else "#333333")
    if spec.is_rate:
        ax.set_ylim(0, 105)
        ax.yaxis.set_major_formatter(PercentFormatter(100))
    ax.set_ylabel(wrap_label(spec.metric, 22), fontsize=9)
    ax.set_xlabel(spec.label)
    better = "higher" if spec.higher_is_better else "lower"
    fit_xticklabels(fig, ax, spec.groups)
    settle(fig, ax, f"{spec.benchmark} / {spec.scenario}\n"
                    f"{spec.metric} by {spec.label} (95% CI; {better} is better)")
    return fig


def write_plots(metrics: RunMetrics, out_dir: str | Path) -> list[Path]:
    """Write every plot of :func:`plot_specs` into ``out_dir``; return the paths."""
    out = Path(out_dir)
    return [render(spec, out / spec.filename) for spec in plot_specs(metrics)]


def plots_dir_for(json_path: str | Path) -> Path:
    """``report.json`` -> ``report.plots/`` beside it."""
    p = Path(json_path)
    return p.with_name(f"{p.stem}.plots")
