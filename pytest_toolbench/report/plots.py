"""Plots of a run: one overview figure, and one figure per benchmark.

One PNG per (benchmark, scenario, breakdown label, metric) made 74 files for one run of the four
suites, each titled without the model or the run, an all-zero metric drawn as an empty box and
a 0% bar invisible. Here a run gets:

* ``overview.png``: per benchmark a panel of each scenario's headline metric (the first the
  benchmark's headline names that the scenario has, else its first metric);
* ``<benchmark>.png``: one panel per metric, a bar per scenario and, under it, per breakdown
  group (``hops=3``), so every number of the benchmark is on one page.

Each title names the model and the run; every bar is labelled with its value and n, its 95% CI
drawn as an error bar; a 0 is a marker on the axis, not a bar of no width. A metric that is n/a
or 0 in every bar is not drawn: the figure's note names it. :func:`run_figures` holds exactly the
numbers drawn (the aggregate's, rates in percent), so a test can check them. Rendering uses
matplotlib's Agg canvas without pyplot: no display, no global state, thread-safe.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field

from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.results.aggregate import MetricValue, RunMetrics
from pytest_toolbench.results.headline import DEFAULT_HEADLINE, Headline


class Bar(DeferredModel):
    label: str
    #: None where the metric is undefined (n = 0); rates in percent.
    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0


class Panel(DeferredModel):
    title: str
    is_rate: bool
    higher_is_better: bool
    bars: list[Bar]


class FigureSpec(DeferredModel):
    #: The file's stem: ``overview`` or the benchmark's name.
    name: str
    title: str
    panels: list[Panel]
    #: Panels not drawn because every bar was n/a or 0 (their titles).
    not_drawn: list[str] = Field(default_factory=list)

    @property
    def filename(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.\-]+", "_", self.name) + ".png"

    @property
    def note(self) -> str:
        if not self.not_drawn:
            return ""
        return "not drawn (n/a or 0 in every bar): " + ", ".join(self.not_drawn)


def _defined(x: float | None) -> bool:
    return x is not None and not math.isnan(x)


def _bar(label: str, mv: MetricValue | None) -> Bar:
    if mv is None:
        return Bar(label=label, value=None)
    scale = 100.0 if mv.is_rate else 1.0

    def scaled(x: float | None) -> float | None:
        return None if x is None else x * scale

    return Bar(label=label, value=scaled(mv.value), ci_low=scaled(mv.ci_low),
               ci_high=scaled(mv.ci_high), n=mv.n)


def _empty(panel: Panel) -> bool:
    """n/a (or nan) or 0 in every bar: a panel of nothing."""
    return all(not _defined(b.value) or b.value == 0 for b in panel.bars)


def _split(panels: list[Panel]) -> tuple[list[Panel], list[str]]:
    drawn = [p for p in panels if not _empty(p)]
    return drawn, [p.title for p in panels if _empty(p)]


def title_of(what: str, model: str, run_id: str) -> str:
    return f"{what} · model {model or '?'} · run {run_id or '?'}"


def overview_figure(metrics: RunMetrics, *, model: str, run_id: str,
                    headlines: Mapping[str, Headline] | None = None) -> FigureSpec:
    """Per benchmark and headline metric a panel, a bar per scenario."""
    panels: dict[tuple[str, str], Panel] = {}
    for s in metrics.scenarios:
        wanted = (headlines or {}).get(s.benchmark, DEFAULT_HEADLINE).metrics
        name = next((m for m in wanted if m in s.metrics), next(iter(s.metrics), None))
        if name is None:
            continue
        mv = s.metrics[name]
        panel = panels.setdefault((s.benchmark, name), Panel(
            title=f"{s.benchmark}: {name}", is_rate=mv.is_rate,
            higher_is_better=mv.higher_is_better, bars=[]))
        panel.bars.append(_bar(s.scenario, mv))
    drawn, skipped = _split(list(panels.values()))
    return FigureSpec(name="overview", title=title_of("overview", model, run_id), panels=drawn,
                      not_drawn=skipped)


def benchmark_figure(metrics: RunMetrics, benchmark: str, *, model: str,
                     run_id: str) -> FigureSpec:
    """Per metric a panel: a bar per scenario, then per breakdown group of it (indented)."""
    panels: dict[str, Panel] = {}
    for s in metrics.scenarios:
        if s.benchmark != benchmark:
            continue
        for name, mv in s.metrics.items():
            panel = panels.setdefault(name, Panel(
                title=name, is_rate=mv.is_rate, higher_is_better=mv.higher_is_better, bars=[]))
            panel.bars.append(_bar(s.scenario, mv))
            for label, groups in s.breakdown.items():
                for g in groups:
                    panel.bars.append(_bar(f"  {label}={g.group}", g.metrics.get(name)))
    drawn, skipped = _split(list(panels.values()))
    return FigureSpec(name=benchmark, title=title_of(benchmark, model, run_id), panels=drawn,
                      not_drawn=skipped)


def run_figures(metrics: RunMetrics, *, model: str, run_id: str,
                headlines: Mapping[str, Headline] | None = None) -> list[FigureSpec]:
    """The overview, then one figure per benchmark (in the report's order); a figure with no
    panel to draw is still written when it has a note (it says why it is empty)."""
    benchmarks: list[str] = []
    for s in metrics.scenarios:
        if s.benchmark not in benchmarks:
            benchmarks.append(s.benchmark)
    figures = [overview_figure(metrics, model=model, run_id=run_id, headlines=headlines)]
    figures += [benchmark_figure(metrics, b, model=model, run_id=run_id) for b in benchmarks]
    return [f for f in figures if f.panels or f.not_drawn]


def _value_text(b: Bar, is_rate: bool) -> str:
    if b.value is None:
        return "n/a"
    if math.isnan(b.value):
        return f"nan n={b.n}"
    number = f"{b.value:.1f}%" if is_rate else f"{b.value:.3g}"
    return f"{number} n={b.n}"


#: Inches per bar, and around each panel (its title, the axis).
BAR_IN, PANEL_IN = 0.24, 0.9


def draw(spec: FigureSpec) -> Any:
    """The figure (a matplotlib Figure): panels in up to three columns, horizontal bars with the
    CI as error bars and the value and n written beside each; rates on a 0-100 % axis."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    cols = 1 if len(spec.panels) <= 1 else 2 if len(spec.panels) <= 4 else 3
    rows = max(1, math.ceil(len(spec.panels) / cols))
    heights = [max([PANEL_IN] + [PANEL_IN + BAR_IN * len(p.bars)
                                 for p in spec.panels[r * cols:(r + 1) * cols]])
               for r in range(rows)]
    note_in = 0.5 if spec.note else 0.0
    fig = Figure(figsize=(5.2 * cols, sum(heights) + 0.8 + note_in), dpi=100)
    FigureCanvasAgg(fig)
    if spec.panels:
        grid = fig.add_gridspec(rows, cols, height_ratios=heights)
        for i, panel in enumerate(spec.panels):
            _draw_panel(fig.add_subplot(grid[i // cols, i % cols]), panel)
    fig.suptitle(spec.title, fontsize=11)
    if spec.note:
        fig.text(0.01, 0.005, _wrap(spec.note, int(95 * cols)), fontsize=8, va="bottom",
                 color="#555555")
    fig.tight_layout(rect=(0, note_in / fig.get_figheight(), 1, 1))
    return fig


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width, break_long_words=False)) or text


def _draw_panel(ax: Any, panel: Panel) -> None:
    from matplotlib.ticker import PercentFormatter

    from pytest_toolbench.plot_layout import wrap_label

    ys = list(range(len(panel.bars)))
    values = [b.value if _defined(b.value) else 0.0 for b in panel.bars]
    lower = [max(0.0, b.value - b.ci_low) if _defined(b.value) and _defined(b.ci_low) else 0.0
             for b in panel.bars]  # type: ignore[operator]
    upper = [max(0.0, b.ci_high - b.value) if _defined(b.value) and _defined(b.ci_high) else 0.0
             for b in panel.bars]  # type: ignore[operator]
    colours = ["#4c72b0" if not b.label.startswith(" ") else "#8fa9d6" for b in panel.bars]
    ax.barh(ys, values, color=colours, xerr=[lower, upper], capsize=2, ecolor="#333333",
            height=0.7)
    top = max([100.0] if panel.is_rate else [1e-9, *(v + u for v, u in zip(values, upper))])
    for y, b, v, u in zip(ys, panel.bars, values, upper):
        if _defined(b.value) and b.value == 0:  # a bar of no width: a marker on the axis
            ax.plot([0], [y], marker="D", markersize=4, color="#4c72b0", clip_on=False)
        ax.annotate(_value_text(b, panel.is_rate), (v + u, y), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=7, color="#222222")
    ax.set_yticks(ys)
    ax.set_yticklabels([b.label.strip() for b in panel.bars], fontsize=7)
    for tick, b in zip(ax.get_yticklabels(), panel.bars):
        if not b.label.startswith(" "):  # a scenario, above its (lighter) breakdown groups
            tick.set_fontweight("bold")
    ax.invert_yaxis()
    ax.set_xlim(0, top * 1.35)  # room for the value labels right of the longest bar
    if panel.is_rate:
        ax.xaxis.set_major_formatter(PercentFormatter(100))
        ax.set_xticks([0, 25, 50, 75, 100])
    ax.tick_params(axis="x", labelsize=7)
    better = "higher" if panel.higher_is_better else "lower"
    ax.set_title(f"{wrap_label(panel.title, 40)}\n(95% CI; {better} is better)", fontsize=9)


def render(spec: FigureSpec, path: Path) -> Path:
    """Write :func:`draw`'s figure as a PNG."""
    fig = draw(spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


def write_plots(metrics: RunMetrics, out_dir: str | Path, *, model: str = "", run_id: str = "",
                headlines: Mapping[str, Headline] | None = None) -> list[Path]:
    """Write the overview and each benchmark's figure into ``out_dir``; return the paths."""
    out = Path(out_dir)
    return [render(spec, out / spec.filename)
            for spec in run_figures(metrics, model=model, run_id=run_id, headlines=headlines)]


def plots_dir_for(json_path: str | Path) -> Path:
    """``report.json`` -> ``report.plots/`` beside it."""
    p = Path(json_path)
    return p.with_name(f"{p.stem}.plots")
