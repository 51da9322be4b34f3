"""Plots readable at a glance: nothing clipped or overlapping, rates in %, no empty chart (issue 22)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_toolbench.compare import LoadedRun, compare_runs
from pytest_toolbench.compare.plot import draw_comparison, plot_comparison
from pytest_toolbench.plot_layout import layout_problems
from pytest_toolbench.report.plots import draw, run_figures, write_plots
from pytest_toolbench.results.aggregate import RunMetrics, aggregate
from pytest_toolbench.results.case_result import CaseResult, Outcome
from pytest_toolbench.results.metrics import MetricSpec

#: ToolBeHonest-like subgroup names: long, with underscores, many of them.
GROUPS = ["multi_step_w_rep", "multi_step_wo_rep", "single_step", "solvable_long_horizon",
          "unsolvable_missing_tool", "unsolvable_potential_tool", "limited_functionality_tool",
          "another_rather_long_subtask_name", "x", "short", "medium_length", "yet_another_one"]


def subtask_metrics(count: int) -> RunMetrics:
    """A ToolBeHonest-like run: ``count`` subtasks with long names, two metrics."""
    specs = {"toolbehonest": (MetricSpec(name="level_three_missing_tool_selection_rate",
                                         value="correct"),
                              MetricSpec(name="l1_em", value="em"))}
    cases = [CaseResult(case_id=f"toolbehonest-{i}-MNT", benchmark="toolbehonest",
                        scenario="MNT-with-a-rather-long-scenario-name", model="m",
                        outcome=Outcome.PASSED, labels={"subtask": GROUPS[i % count]},
                        values={"correct": float(i % 3 != 0), "em": float(i % 2)})
             for i in range(3 * count)]
    return aggregate(cases, specs, {"toolbehonest": ("subtask",)}, n_boot=50)


@pytest.mark.parametrize("count", [2, 3, 6, 12])
def test_run_figures_have_no_clipped_title_nor_overlapping_labels(count: int) -> None:
    for figure in run_figures(subtask_metrics(count), model="org/model-7B", run_id="r1"):
        fig = draw(figure)
        assert layout_problems(fig) == [], figure.name
        assert fig._suptitle.get_text() == f"{figure.name} · model org/model-7B · run r1"
        for ax in fig.axes:
            assert ax.get_xlim()[0] == 0 and ax.get_xticks()[-1] == 100  # rates: 0-100 %
            fig.canvas.draw()
            assert all(t.get_text().endswith("%") for t in ax.get_xticklabels() if t.get_text())
    (panel,) = [p for p in run_figures(subtask_metrics(count), model="m", run_id="r")[1].panels
                if p.title == "l1_em"]
    # every group is labelled, whole, under its scenario
    assert [b.label.strip() for b in panel.bars[1:]] == [f"subtask={g}" for g in sorted(GROUPS[:count])]


def test_values_are_labelled_and_a_zero_is_a_marker() -> None:
    """A 0% bar has no width: a marker on the axis shows it; each bar says its value and n."""
    figure = run_figures(subtask_metrics(2), model="m", run_id="r")[1]
    panel = next(p for p in figure.panels if p.title == "l1_em")
    fig = draw(figure.model_copy(update={"panels": [panel], "not_drawn": []}))
    (ax,) = fig.axes
    labels = [t.get_text() for t in ax.texts]
    assert labels == [f"{b.value:.1f}% n={b.n}" for b in panel.bars]
    zeros = [b for b in panel.bars if b.value == 0]
    markers = [line for line in ax.get_lines() if line.get_marker() == "D"]
    assert zeros and len(markers) == len(zeros)
    assert all(list(line.get_xdata()) == [0] for line in markers)


def test_an_all_zero_or_all_n_a_metric_is_not_drawn_and_the_figure_says_so() -> None:
    specs = {"toolhop": (MetricSpec(name="accuracy", value="answer_correct"),
                         MetricSpec(name="never", value="zero"),
                         MetricSpec(name="instance_error_rate", kind="ratio", value="error_calls",
                                    denominator="calls", higher_is_better=False))}
    results = [_result(i, 0) for i in range(4)]
    for r in results:
        r.values["zero"] = 0.0
    metrics = aggregate(results, specs, {"toolhop": ("hops",)})
    overview, toolhop = run_figures(metrics, model="m", run_id="r")
    assert [p.title for p in toolhop.panels] == ["accuracy"]
    assert toolhop.not_drawn == ["never", "instance_error_rate"]
    fig = draw(toolhop)
    assert len(fig.axes) == 1
    assert any("not drawn (n/a or 0 in every bar): never, instance_error_rate" in t.get_text()
               for t in fig.texts)


def test_the_layout_check_sees_what_was_wrong_before() -> None:
    """The old drawing (one-line title, labels as they come) at the old size: the checker flags
    it, so the test above is not vacuous."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.0, 3.4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.bar(range(3), [1, 2, 3])
    ax.set_xticks(range(3))
    ax.set_xticklabels(GROUPS[:3], fontsize=8)
    ax.set_ylabel("l1_em (%)")
    ax.set_xlabel("subtask")
    ax.set_title("toolbehonest / MNT: l1_em by subtask (95% CI; higher is better)", fontsize=9)
    fig.tight_layout()
    problems = layout_problems(fig)
    assert any(p.startswith("clipped: 'toolbehonest") for p in problems)
    assert any(p.startswith("overlapping x labels") for p in problems)


def _result(i: int, calls: int) -> CaseResult:
    return CaseResult(case_id=f"toolhop-{i}-mandatory", benchmark="toolhop", scenario="mandatory",
                      model="m", outcome=Outcome.PASSED, labels={"hops": 3 + i % 2},
                      values={"answer_correct": 1.0, "error_calls": 0.0, "calls": float(calls)})


def test_no_panel_for_a_metric_that_is_n_a_in_every_group(tmp_path: Path) -> None:
    specs = {"toolhop": (MetricSpec(name="accuracy", value="answer_correct"),
                         MetricSpec(name="instance_error_rate", kind="ratio", value="error_calls",
                                    denominator="calls", higher_is_better=False))}
    no_calls = aggregate([_result(i, 0) for i in range(4)], specs, {"toolhop": ("hops",)})
    assert no_calls.scenario("toolhop", "mandatory").metrics["instance_error_rate"].value is None
    _, toolhop = run_figures(no_calls, model="m", run_id="r")
    assert [p.title for p in toolhop.panels] == ["accuracy"]
    assert [p.name for p in write_plots(no_calls, tmp_path)] == ["overview.png", "toolhop.png"]
    results = [_result(i, 2) for i in range(4)]
    results[0].values["error_calls"] = 1.0  # an error rate of 0 everywhere is not drawn either
    with_calls = aggregate(results, specs, {"toolhop": ("hops",)})
    assert len(run_figures(with_calls, model="m", run_id="r")[1].panels) == 2


def _cases(model: str, ok: list[int], scenario: str) -> list[CaseResult]:
    return [CaseResult(case_id=f"bench-{i}-{scenario}", benchmark="bench", scenario=scenario,
                       model=model, outcome=Outcome.PASSED if v else Outcome.FAILED,
                       labels={"hops": 3}, values={"correct": float(v)}) for i, v in enumerate(ok)]


def test_comparison_chart_uses_percent_and_fits_many_metrics(tmp_path: Path) -> None:
    specs = {"bench": (MetricSpec(name="accuracy_with_a_long_metric_name", value="correct"),)}
    labels = {"bench": ("hops",)}
    scenarios = [f"scenario-{k}-with-a-long-descriptive-name" for k in range(14)]
    runs = []
    for model, ok in (("org/model-a-7B-Instruct", [1, 1, 0, 1]), ("org/model-b-72B", [1, 0, 0, 0])):
        cases = [c for s in scenarios for c in _cases(model, ok, s)]
        runs.append(LoadedRun.from_cases(model, cases, specs, labels, n_boot=200))
    comp = compare_runs(runs, specs, labels, n_boot=200)
    fig = draw_comparison(comp)
    assert layout_problems(fig) == []
    ax = fig.axes[0]
    assert ax.get_xlim() == (0, 100)  # % like every table, not 0-1
    bars = [p.get_width() for p in ax.patches]
    assert sorted(set(round(b, 6) for b in bars)) == [25.0, 75.0]
    assert len(ax.get_yticklabels()) == 14
    assert plot_comparison(comp, tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
