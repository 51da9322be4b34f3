"""A model-comparison bar chart: one group of bars per metric, one bar per run, CI error bars."""

from __future__ import annotations

from pathlib import Path

from pytest_toolbench.compare.models import Comparison


def plot_comparison(comp: Comparison, path: str | Path, *, subgroups: bool = False) -> Path:
    """Write a PNG (Agg backend: no display needed). Top-level metrics only unless ``subgroups``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = [m for s in comp.scenarios for m in s.metrics
            if (subgroups or m.label is None) and any(v and v.value is not None for v in m.values)]
    if not rows:
        raise ValueError("nothing to plot: no metric has a value in any run")
    n_runs = len(comp.runs)
    x = np.arange(len(rows))
    width = 0.8 / n_runs
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(rows) * max(1, n_runs / 2) + 2), 4.8))
    for i, run in enumerate(comp.runs):
        vals, lo, hi = [], [], []
        for m in rows:
            v = m.values[i]
            value = v.value if v and v.value is not None else np.nan
            vals.append(value)
            lo.append(value - v.ci_low if v and v.ci_low is not None else 0.0)
            hi.append(v.ci_high - value if v and v.ci_high is not None else 0.0)
        ax.bar(x + (i - (n_runs - 1) / 2) * width, vals, width, yerr=[lo, hi], capsize=3,
               label=run.label)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{m.benchmark}/{m.scenario}\n{m.row_name}" for m in rows],
                       rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(f"value (error bars: {100 * comp.confidence:g}% CI)")
    ax.set_title("model comparison")
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
